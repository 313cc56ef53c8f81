"""Test doubles and a fault kit for agents built on this package.

- `ScriptedChatModel`, `tool_call`, `invalid_call` (`testing.scripted`): a chat model that
  plays back scripted `AIMessage`s, so agents run offline.
"""

from __future__ import annotations

from .scripted import ScriptedChatModel, invalid_call, tool_call

__all__ = [
    "ScriptedChatModel",
    "invalid_call",
    "tool_call",
]
