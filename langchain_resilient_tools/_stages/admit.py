"""Admission: calls to unknown tools and calls whose arguments did not parse stop here."""

from __future__ import annotations

from typing import Any

from .._call import Call
from .._errors import MalformedCall, UnknownTool
from . import AsyncNext, Next, Stage


def admit(call: Call) -> None:
    """Raise `UnknownTool` or `MalformedCall` when the call cannot be run as it is."""
    if call.tool is None and not call.passthrough_unknown:
        raise UnknownTool(call.name, call.valid_tools)
    if call.parse_error is not None:
        raise MalformedCall(call.parse_error, raw=call.raw_args)


class AdmitStage(Stage):
    name = "admit"

    def wrap(self, call: Call, call_next: Next) -> Any:
        admit(call)
        return call_next(call)

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        admit(call)
        return await call_next(call)
