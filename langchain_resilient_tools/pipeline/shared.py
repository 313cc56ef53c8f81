"""The breaker, the dedup ledger and the caches on a shared `StateBackend`: the glue
they share.

Stages ask `backend_for(env, call)`; `None` means in-process (their own fast cachetools
structures, the default). Otherwise each concern keeps its shared state beside its
stage: the result and stale cache in `state.results.SharedResultStore`, the breaker in
`pipeline.breaker.shared`, the dedup ledger in `pipeline.dedup.shared`. On the async
path every store operation runs off the event loop (`off_loop`).

A failing store raises `BackendError`; `Shared.on_error` decides (`fail`):
``"open"`` carries on with the worker's own breaker and dedup, ``"closed"`` answers
``transient_failure`` without running the tool.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.call import Call
from ..core.errors import StateUnavailable
from ..state.backend import BackendError, StateBackend
from ..state.choose import as_backend

if TYPE_CHECKING:
    from .stage import Env

log = logging.getLogger(__name__)
T = TypeVar("T")

_BACKENDS = "state_backends"


def backend_for(env: Env, call: Call) -> StateBackend | None:
    """The shared backend for `call` under its policy's `state_backend`, or `None`."""
    mode = call.resolved.policy.shared.backend
    if mode == "local":
        return None
    backend: StateBackend | None = env.backend
    if backend is None and mode == "store" and call.store is not None:
        made: dict[int, tuple[Any, StateBackend | None]] = env.resources.setdefault(_BACKENDS, {})
        hit = made.get(id(call.store))
        if hit is None:  # the store is kept in the entry, so its id stays unique
            hit = made[id(call.store)] = (call.store, as_backend(call.store))
        backend = hit[1]
    return backend


async def off_loop(shared: bool, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` for an async call: on a worker thread when it touches a shared store
    (`shared`), so a slow or remote store never blocks the event loop and the other
    graphs and calls on it; in place otherwise (in-process state takes microseconds).

    A LangGraph async store (e.g. ``AsyncPostgresStore``) called from that thread runs
    its async methods on its own event loop.
    """
    if not shared:
        return fn(*args)
    return await asyncio.to_thread(fn, *args)


def fail(call: Call, exc: BackendError, what: str) -> None:
    """Handle a store failure per `on_backend_error`: log and go on, or raise."""
    if call.resolved.policy.shared.on_error == "closed":
        raise StateUnavailable() from exc
    log.warning("state store failed (%s of %s); carrying on in-process", what, call.name)
