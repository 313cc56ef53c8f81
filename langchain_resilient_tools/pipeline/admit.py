"""Admission: calls to unknown tools and calls whose arguments did not parse stop here."""

from __future__ import annotations

from ..core.call import Call
from ..core.errors import MalformedCall, UnknownTool
from .stage import BeforeStage


def admit(call: Call) -> None:
    """Raise `UnknownTool` or `MalformedCall` when the call cannot be run as it is."""
    if call.tool is None and not call.passthrough_unknown:
        raise UnknownTool(call.name, call.valid_tools)
    if call.parse_error is not None:
        raise MalformedCall(call.parse_error, raw=call.raw_args)


class AdmitStage(BeforeStage):
    name = "admit"
    before = staticmethod(admit)
