"""The fallback chain: what answers when the service failed.

Only service failures (`pipeline.health.is_service_failure`: timeout, busy, transient error,
open circuit) fall back; a bad argument is answered with its error. The sources are
tried in `Fallback.order`:

- ``stale_cache``: the last good result of the same call (idempotent tools only: writes
  are never served from a cache), if younger than `Fallback.stale_s`; marked stale with
  its age, ``served_by = "stale_cache"``. "The same call" is the cache's
  `core.key.result_key`: never another user's or (by default) another thread's result;

- ``fallback``: the policy's stub data (`Fallback.stub`), or ``stub(tool_name, args)``; marked as
  substitute data, ``served_by = "fallback"``. For a write it is used only when the tool
  certainly did not run (open circuit, busy, timed out before starting), never when
  the action may have taken effect.

When none applies, the original failure goes on to the error envelope.
"""

from __future__ import annotations

import logging
from typing import Any

from ..core.call import Call
from ..core.errors import ResilienceSignal
from ..core.key import result_key
from ..core.policy import ResolvedPolicy
from ..text import messages as m
from .health import is_service_failure, surely_not_executed
from .shared import backend_for, off_loop, reissue, store_for
from .stage import AsyncNext, Next, Stage

log = logging.getLogger(__name__)
_NOTHING = object()


class FallbackStage(Stage):
    name = "fallback"

    def applies(self, resolved: ResolvedPolicy) -> bool:
        fallback = resolved.policy.fallback
        return fallback.stub is not None or (resolved.idempotent and fallback.stale_s is not None)

    def _stale(self, call: Call) -> Any:
        max_age = call.resolved.policy.fallback.stale_s
        store = store_for(self.env, call)
        key = None if max_age is None or store is None else result_key(call)
        if max_age is None or store is None or key is None:
            return _NOTHING
        entry = store.get(key, max_age=max_age)
        if entry is None:
            return _NOTHING
        age = m.age_text(store.clock() - entry.stored_at)
        call.record.served_by = "stale_cache"
        call.record.notices.append(m.STALE.format(tool=call.name, age=age))
        return reissue(entry.value, call)

    @staticmethod
    def _substitute(call: Call, exc: BaseException) -> Any:
        stub = call.resolved.policy.fallback.stub
        if stub is None or not (call.idempotent or surely_not_executed(exc)):
            return _NOTHING
        if callable(stub):
            try:
                stub = stub(call.name, dict(call.args))
            except Exception:  # a broken fallback must not hide the real failure
                log.exception("fallback for %s raised", call.name)
                return _NOTHING
        call.record.served_by = "fallback"
        call.record.notices.append(m.SUBSTITUTE.format(tool=call.name))
        return stub

    def answer(self, call: Call, exc: BaseException) -> Any:
        """The fallback answer for `call` after `exc`, or `_NOTHING`."""
        if not is_service_failure(exc, call):
            return _NOTHING
        for source in call.resolved.policy.fallback.order:
            value = self._stale(call) if source == "stale_cache" else self._substitute(call, exc)
            if value is not _NOTHING:
                return value
        return _NOTHING

    def wrap(self, call: Call, call_next: Next) -> Any:
        try:
            return call_next(call)
        except ResilienceSignal as exc:
            value = self.answer(call, exc)
            if value is _NOTHING:
                raise
            return value

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        try:
            return await call_next(call)
        except ResilienceSignal as exc:
            shared = backend_for(self.env, call) is not None  # a stale result in a store
            value = await off_loop(shared, self.answer, call, exc)
            if value is _NOTHING:
                raise
            return value
