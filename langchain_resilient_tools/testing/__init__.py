"""Test doubles and a fault kit for agents built on this package.

- `ScriptedChatModel`, `tool_call`, `invalid_call` (`testing.scripted`): a chat model that
  plays back scripted `AIMessage`s, so agents run offline.
- `with_faults`, `faulty_tools`, `FaultPlan`, `Fault`, `FaultLog` (`testing.faults`): tools
  that fail as services fail (refused, reset, lost reply, stall, 429, 503), reproducibly.
- `FaultyChatModel`, `ModelFaultPlan`, `Slip`, `slip_call`, `faulty_message`
  (`testing.model_faults`): a model that slips in its tool calls as real models do.
"""

from __future__ import annotations

from .faults import (
    Fault,
    FaultEvent,
    FaultLog,
    FaultPlan,
    ServiceRefused,
    faulty_tools,
    with_faults,
)
from .model_faults import FaultyChatModel, ModelFaultPlan, Slip, faulty_message, slip_call
from .scripted import ScriptedChatModel, invalid_call, tool_call

__all__ = [
    "Fault",
    "FaultEvent",
    "FaultLog",
    "FaultPlan",
    "FaultyChatModel",
    "ModelFaultPlan",
    "ScriptedChatModel",
    "ServiceRefused",
    "Slip",
    "faulty_message",
    "faulty_tools",
    "invalid_call",
    "slip_call",
    "tool_call",
    "with_faults",
]
