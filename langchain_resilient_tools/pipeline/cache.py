"""The result cache for idempotent tools, and the keeper of last good results.

A hit (an identical call within `Cache.ttl_s`) answers without running the tool; it is
marked with its age and ``record.served_by = "cache"``, and it still goes through the
pipeline's bookkeeping (record, `on_outcome`), so a cache can never hide a call.
Every good result of an idempotent tool is kept in the tool's `ResultStore` when the
cache or the stale fallback (`Fallback.stale_s`) is on. Writes are never cached.

Results are kept and found by `core.key.result_key`: a result is served only to a call
that could have produced it (same arguments, same declared inputs, and by default the
same thread, runtime context and ``configurable``; `core.reads` states the rule). A
call whose key cannot be built shares nothing.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from ..core.call import Call
from ..core.key import result_key
from ..core.policy import ResolvedPolicy
from ..state.results import ResultStore, SharedResultStore
from ..text import messages as m
from .shared import off_loop, reissue, store_for
from .stage import AsyncNext, Next, Stage


def storable(value: Any) -> bool:
    """Good results only: not state updates, not error messages."""
    if isinstance(value, Command):
        return False
    return not (isinstance(value, ToolMessage) and value.status == "error")


class CacheStage(Stage):
    name = "cache"

    def applies(self, resolved: ResolvedPolicy) -> bool:
        policy = resolved.policy
        return resolved.idempotent and bool(policy.cache.ttl_s or policy.fallback.stale_s)

    def _hit(self, call: Call, store: ResultStore | None) -> tuple[bool, Any]:
        ttl = call.resolved.policy.cache.ttl_s
        key = None if store is None or ttl is None else result_key(call)
        if store is None or ttl is None or key is None:
            return False, None
        entry = store.get(key, max_age=ttl)
        if entry is None:
            return False, None
        call.record.served_by = "cache"
        call.record.notices.append(m.CACHED.format(age=m.age_text(store.clock() - entry.stored_at)))
        return True, reissue(entry.value, call)

    @staticmethod
    def _keep(call: Call, store: ResultStore | None, value: Any) -> None:
        if store is not None and call.record.served_by == "tool" and storable(value):
            key = result_key(call)
            if key is not None:
                store.put(key, value)

    def wrap(self, call: Call, call_next: Next) -> Any:
        store = store_for(self.env, call)
        hit, value = self._hit(call, store)
        if hit:
            return value
        value = call_next(call)
        self._keep(call, store, value)
        return value

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        store = store_for(self.env, call)
        shared = isinstance(store, SharedResultStore)  # in a store: off the loop
        hit, value = await off_loop(shared, self._hit, call, store)
        if hit:
            return value
        value = await call_next(call)
        await off_loop(shared, self._keep, call, store, value)
        return value
