"""How `ResilientToolNode` runs the calls of one step, in the order its `Step` asks.

Every driver takes the step's calls by index (``one(i)`` runs call ``i``) and its
order (`Step.order`: the index of an earlier call each waits for, e.g. identical calls:
the first runs first), and honours the run's ``max_concurrency``:

- `run_threaded`: a sync step where an event loop already runs in the thread (Jupyter):
  the calls run on a persistent pool of threads (no pool per step);
- `arun_all`: an async step, or a sync one on the private event loop of its thread
  (`runtime.steploop`), whose calls' stages are tasks there;
- `run_reviewed` / `arun_reviewed`: a step in which a write may ask a person: every
  call is a LangGraph task, started in order, so that a resume (which runs the node
  again) finds each finished call's answer instead of running it again; then each
  question the answers carry (`Step.review`) is asked, in the order of the calls
  (`adapters.review`).

A call that raises (an interrupt) is re-raised only once its siblings are done: none is
left running in the background, and a resumed step finds their answers recorded.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..pipeline import Step
from ..runtime.executor import dispatch_pool
from . import review

Order = Sequence[int | None]


def run_threaded(one: Callable[[int], Any], order: Order, config: RunnableConfig) -> list[Any]:
    """Every call of a sync step on threads, the first in this one."""
    n = len(order)
    limit = config.get("max_concurrency") or n
    gate = threading.BoundedSemaphore(limit) if limit < n else None
    ran = [threading.Event() for _ in range(n)]

    def job(i: int) -> Any:
        if (j := order[i]) is not None:
            ran[j].wait()
        try:
            if gate is None:
                return one(i)
            with gate:
                return one(i)
        finally:
            ran[i].set()

    pool = dispatch_pool()
    futures = [pool.submit(partial(contextvars.copy_context().run, job, i)) for i in range(1, n)]
    results: list[Any] = []
    error: BaseException | None = None
    try:
        results.append(job(0))
    except BaseException as exc:  # re-raised once the siblings are done
        error = exc
    for fut in futures:
        try:
            results.append(fut.result())
        except BaseException as exc:
            error = error or exc
    if error is not None:
        raise error
    return results


async def arun_all(
    one: Callable[[int], Awaitable[Any]], order: Order, config: RunnableConfig
) -> list[Any]:
    """Every call of the step, concurrently, on the running event loop."""
    n = len(order)
    limit = config.get("max_concurrency")
    gate = asyncio.Semaphore(limit) if limit and limit < n else None
    if gate is None and all(j is None for j in order):
        coros = [one(i) for i in range(n)]
    else:
        ran = [asyncio.Event() for _ in range(n)]

        async def job(i: int) -> Any:
            if (j := order[i]) is not None:
                await ran[j].wait()
            try:
                if gate is None:
                    return await one(i)
                async with gate:
                    return await one(i)
            finally:
                ran[i].set()

        coros = [job(i) for i in range(n)]
    results = await asyncio.gather(*coros, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def run_reviewed(
    one: Callable[[int], Any], step: Step, config: RunnableConfig, node: str
) -> list[Any]:
    """Every call of a sync `step` that may ask a person, each a LangGraph task."""
    review.require_checkpointer(config, node)

    def job(i: int) -> Callable[[], Any]:
        return lambda: one(i)

    futures: list[Any] = []
    for i, j in enumerate(step.order):
        if j is not None:
            futures[j].result()
        futures.append(review.start(job(i)))
    return review.review_each(step, [future.result() for future in futures], job)


async def arun_reviewed(
    one: Callable[[int], Awaitable[Any]], step: Step, config: RunnableConfig, node: str
) -> list[Any]:
    """The async `run_reviewed`."""
    review.require_checkpointer(config, node)

    def job(i: int) -> Callable[[], Awaitable[Any]]:
        return lambda: one(i)

    futures: list[Any] = []
    for i, j in enumerate(step.order):
        if j is not None:
            await futures[j]
        futures.append(review.astart(job(i)))
    return await review.areview_each(step, [await future for future in futures], job)
