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

from langchain_core.messages import ToolMessage

from ..core.call import Call
from ..core.errors import BackendError, StateUnavailable
from ..state.backend import StateBackend
from ..state.choose import as_backend
from ..state.results import MemoryStore, ResultStore, SharedResultStore

if TYPE_CHECKING:
    from .stage import Env

log = logging.getLogger(__name__)
T = TypeVar("T")


def backend_for(env: Env, call: Call) -> StateBackend | None:
    """The shared backend for `call` under its policy's `Shared.backend`, or `None`."""
    mode = call.resolved.policy.shared.backend
    if mode == "local":
        return None
    backend: StateBackend | None = env.backend
    if backend is None and mode == "store" and call.store is not None:
        made = env.backends
        hit = made.get(id(call.store))
        if hit is None:  # the store is kept in the entry, so its id stays unique
            hit = made[id(call.store)] = (call.store, as_backend(call.store))
        backend = hit[1]
    return backend


def store_for(env: Env, call: Call) -> ResultStore | None:
    """The store in which the cache stage keeps `call`'s tool's good results and the
    fallback stage finds stale ones: shared (`state.results.SharedResultStore`) or this
    pipeline's own (`Env.results`); `None` when neither the cache nor the stale
    fallback is on."""
    policy = call.resolved.policy
    if not call.idempotent:
        return None
    retention = max(policy.cache.ttl_s or 0.0, policy.fallback.stale_s or 0.0)
    if retention <= 0:
        return None
    backend = backend_for(env, call)
    if backend is not None:
        return SharedResultStore(backend, call.name, retention, policy.cache.scope)
    return env.results.get(
        call.name,
        lambda: MemoryStore(
            retention=retention, maxsize=policy.cache.max_entries, clock=policy.clock
        ),
    )


def reissue(value: Any, call: Call) -> Any:
    """A stored value as the answer to `call` (a stored message gets this call's id)."""
    if isinstance(value, ToolMessage):
        return value.model_copy(update={"tool_call_id": call.id, "id": None})
    return value


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
