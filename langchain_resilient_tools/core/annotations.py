"""Reads and writes from a tool's own annotations (MCP tool annotations), before its name.

An MCP server describes each tool with hints (``readOnlyHint``, ``destructiveHint``,
``idempotentHint``, ``openWorldHint``). Each loader puts them somewhere else in the
LangChain tool's ``metadata``; `hints_of` is the one reader of all of them (a *shape*:
where, and how spelt):

1. ``metadata["mcp"]["tool"]["annotations"]``: LangChain's own adapter
   (`langchain.mcp.MCPAdapter`, `mcp` 2.x), a dict in snake_case (``read_only_hint``);
   camelCase keys, or an object with those attributes (an ``mcp.types.ToolAnnotations``),
   are read there too;
2. top-level camelCase keys (``readOnlyHint``): langchain-mcp-adapters (`mcp` 1.x; a hint
   the server omits is there as `None`); top-level snake_case keys (``read_only_hint``:
   the same dump under `mcp` 2.x) likewise;
3. bare keys (``read_only``, ``destructive``, ``idempotent``, ``open_world``): metadata a
   person wrote on any LangChain tool.

Only a `bool` is a hint (``"yes"``, ``1``, `None` are not said); a shape that says
nothing about reads and writes (no hint, or ``openWorldHint`` alone) does not count, and
neither does any other place (``metadata["annotations"]``, a tool attribute). When several
shapes on one tool count, they are never merged hint by hint (each stands for itself, the
spec's defaults filling its gaps): the **most careful** reading is taken (a write over an
idempotent write over a read), and of equally careful ones the first in the order above.
So one shape can never make a call less careful than another shape of the same tool says;
the shapes set aside are named (`ToolHints.set_aside`), and said once in the log.

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
from dataclasses import dataclass, field
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
    """The behaviour hints a tool declares (`None`: not said), whatever the shape they
    were read from (`hints_of`); two are equal when their hints are."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None
    source: str | None = field(default=None, compare=False)
    """Where they were read (a shape, e.g. ``metadata["mcp"]["tool"]["annotations"]``)."""
    set_aside: tuple[str, ...] = field(default=(), compare=False)
    """Other shapes on the same tool that read as less careful, and were not applied."""

    @property
    def access(self) -> Access:
        """What the hints say, the spec's defaults standing in for those not said."""
        if self.read_only:
            return "read"
        if self.idempotent:
            return "idempotent_write"
        return "write"


_HINTS = ("read_only", "destructive", "idempotent", "open_world")
_SNAKE = tuple(f"{h}_hint" for h in _HINTS)
_CAMEL = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_NESTED = 'metadata["mcp"]["tool"]["annotations"]'


def _nested(metadata: Mapping[str, Any]) -> Any:
    """``metadata["mcp"]["tool"]["annotations"]`` (`langchain.mcp`), or `None`."""
    mcp = metadata.get("mcp")
    tool = mcp.get("tool") if isinstance(mcp, Mapping) else None
    return tool.get("annotations") if isinstance(tool, Mapping) else None


def _read(where: Any, keys: tuple[str, ...], source: str) -> ToolHints | None:
    """The hints at `where` under `keys` (in `_HINTS` order), or `None` when they say
    nothing about reads and writes. `where` is a mapping, or an object whose attributes
    are read (a pydantic ``ToolAnnotations``)."""
    if isinstance(where, Mapping):
        values = [where.get(k) for k in keys]
    else:
        try:
            values = [getattr(where, k, None) for k in keys]
        except Exception:  # an object whose attributes cannot be read says nothing
            return None
    read_only, destructive, idempotent, open_world = (
        v if isinstance(v, bool) else None for v in values
    )
    if read_only is None and destructive is None and idempotent is None:
        return None
    return ToolHints(read_only, destructive, idempotent, open_world, source=source)


def _shapes(metadata: Mapping[str, Any]) -> list[ToolHints]:
    """The hints of each shape that says something, in precedence order (the module)."""
    nested = _nested(metadata)
    found = []
    if nested is not None:
        found += [
            _read(nested, _SNAKE, f'{_NESTED}["read_only_hint"], ...'),
            _read(nested, _CAMEL, f'{_NESTED}["readOnlyHint"], ...'),
        ]
    found += [
        _read(metadata, _CAMEL, 'metadata["readOnlyHint"], ...'),
        _read(metadata, _SNAKE, 'metadata["read_only_hint"], ...'),
        _read(metadata, _HINTS, 'metadata["read_only"], ...'),
    ]
    return [h for h in found if h is not None]


def hints_of(tool: Any) -> ToolHints | None:
    """The hints `tool`'s ``metadata`` declares, in any shape in use (the module), or
    `None` when no shape says anything about reads and writes. Of several shapes, the
    most careful reading wins; the others that read differently are in `set_aside`."""
    metadata = getattr(tool, "metadata", None)
    if not isinstance(metadata, Mapping):
        return None
    shapes = _shapes(metadata)
    if not shapes:
        return None
    chosen = max(shapes, key=lambda h: _CARE[h.access])  # the first of the most careful
    aside = tuple(dict.fromkeys(h.source or "" for h in shapes if h.access != chosen.access))
    if not aside:
        return chosen
    return ToolHints(
        chosen.read_only,
        chosen.destructive,
        chosen.idempotent,
        chosen.open_world,
        source=chosen.source,
        set_aside=aside,
    )


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
