"""Reads and writes from a tool's own annotations (MCP tool annotations), before its name.

An MCP server describes each tool with hints (``readOnlyHint``, ``destructiveHint``,
``idempotentHint``, ``openWorldHint``); `langchain-mcp-adapters` puts them in the
LangChain tool's ``metadata`` (a hint the server omits is there as `None`; a tool the
server does not annotate at all has no such keys). Any LangChain tool whose ``metadata``
carries these keys is read the same way.

What the hints say, in our terms (`Access`), with the spec's defaults for the hints a
server omits once it gave at least one of the three that bear on it (not read-only,
destructive, not idempotent; ``openWorldHint`` says nothing about repeating a call):

- ``readOnlyHint: true``: a **read**, like a tool named ``get_...``;
- not read-only, ``idempotentHint: true``: an **idempotent write** (``idempotent_write``):
  a write whose repeat with the same arguments has no further effect. It is treated as a
  keyed write without the key: retried on transient failures, a timed-out attempt is not
  an unknown outcome, it is journaled (a write whose worker died is sent again), and it
  is never hedged;
- otherwise a **write**.

The MCP spec warns that a client must not let annotations of a server it does not trust
decide what it does. `ToolPolicy.annotations` says how far they are trusted
(`AnnotationTrust`): an annotation may always make a call *more* careful (a tool named
like a read that its server declares destructive becomes a write), so ``"cautious"``
(the default) applies only that direction; ``"trust"`` lets them decide both ways (a tool
named ``git_log`` that its server declares read-only becomes a read: retried, hedged,
reused); ``"ignore"`` uses the name alone. An explicit ``idempotent=`` or
``idempotency_key=`` always wins. All of it is pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

AnnotationTrust = Literal["trust", "cautious", "ignore"]
"""How far a tool's annotations decide whether it is a read or a write (see the module)."""

Access = Literal["read", "idempotent_write", "write"]
"""What a call may be: run again freely, repeated with the same arguments, or neither."""

ClassifiedBy = Literal["explicit", "annotations", "name"]
"""What decided a tool's `Access`: the policy (``idempotent=`` or ``idempotency_key=``),
the tool's annotations, or its name (`policy.infer_idempotent`)."""

_CARE: dict[Access, int] = {"read": 0, "idempotent_write": 1, "write": 2}
"""How careful each access is with a call: a write is never sent twice."""


@dataclass(frozen=True, slots=True)
class ToolHints:
    """The behaviour hints a tool declares (`None`: not said)."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    @property
    def access(self) -> Access:
        """What the hints say, the spec's defaults standing in for those not said."""
        if self.read_only:
            return "read"
        if self.idempotent:
            return "idempotent_write"
        return "write"


def _flag(metadata: Mapping[str, Any], key: str) -> bool | None:
    value = metadata.get(key)
    return value if isinstance(value, bool) else None


def hints_of(tool: Any) -> ToolHints | None:
    """The hints in `tool`'s ``metadata``, or `None` when it says nothing about reads and
    writes (no metadata, only a title, or only ``openWorldHint``)."""
    metadata = getattr(tool, "metadata", None)
    if not isinstance(metadata, Mapping):
        return None
    hints = ToolHints(
        read_only=_flag(metadata, "readOnlyHint"),
        destructive=_flag(metadata, "destructiveHint"),
        idempotent=_flag(metadata, "idempotentHint"),
        open_world=_flag(metadata, "openWorldHint"),
    )
    if hints.read_only is None and hints.destructive is None and hints.idempotent is None:
        return None
    return hints


def classify(
    by_name: bool, hints: ToolHints | None, trust: AnnotationTrust
) -> tuple[Access, ClassifiedBy]:
    """A tool's access when the policy does not say it: from its annotations (as far as
    `trust` allows) or from its name (`by_name`: the name reads as a read)."""
    named: Access = "read" if by_name else "write"
    if hints is None or trust == "ignore":
        return named, "name"
    hinted = hints.access
    if trust == "trust":
        return hinted, "annotations"
    # "cautious": the annotations only ever make the call more careful than its name.
    if _CARE[hinted] > _CARE[named]:
        return hinted, "annotations"
    return named, "name"


def set_aside(by_name: bool, hints: ToolHints | None, trust: AnnotationTrust) -> bool:
    """Whether `trust` kept the annotations from making the tool less careful than its
    name makes it (worth telling the user once: ``annotations="trust"`` would apply them)."""
    if hints is None or trust != "cautious":
        return False
    named: Access = "read" if by_name else "write"
    return _CARE[hints.access] < _CARE[named]
