"""The concrete check for a write whose outcome is unknown: which read shows it.

After ``unknown_outcome`` the model is told to check whether the write took effect
before it sends it again. "Check with a read" alone leaves the model to guess which read
and with what; `Lookups` names one. It knows the reads among an adapter's tools (those
their policies treat as reads, not idempotent writes) by their parameters, and
`check_for` picks the read whose parameters the write's own arguments fill:

- every parameter the read requires is an argument of the write, by name;
- the two share at least one parameter, and at least one word of their names besides
  the verb (`core.policy.name_words`; ``cancel_pending_order`` and ``get_order_details``
  share "order"; plurals and numeric suffixes aside): a read that merely takes the same
  id (``get_data_usage`` for ``enable_roaming``) may not show the write at all, and a
  check that cannot show it would tell the model "not done" or "done" wrongly, so no
  check is named then;
- among several, the one sharing the most name words wins, then the most parameters,
  then the one with fewer parameters (the most specific lookup), then by name.

The check carries the write's values for the shared parameters, so the model can send
it as it is (``"check": {"tool": "get_order_details", "args": {"order_id": "W1"}}``).
Once it has read them, `Lookups` keeps tool names and parameter names only. An adapter
that does not know its sibling tools (a tool wrapped on its own) names no check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool

from ..core.policy import name_words
from ..text import messages as m

_NOT_NOUNS = frozenset(
    {"a", "all", "an", "by", "for", "from", "id", "ids", "of", "the", "to", "with"}
)


def nouns(name: str) -> frozenset[str]:
    """What tool `name` is about: its words but the first (the verb), singular, without
    numbers and filler words (``get_cash_back_disputes`` -> cash, back, dispute)."""
    words = name_words(name)[1:]
    return frozenset(
        w[:-1] if len(w) > 3 and w.endswith("s") else w
        for w in words
        if not w.isdigit() and w not in _NOT_NOUNS
    )


@dataclass(frozen=True, slots=True)
class Read:
    """A read tool as a check: its name, what it is about and its parameters."""

    name: str
    params: frozenset[str]
    required: frozenset[str]
    about: frozenset[str] = frozenset()


def read_of(name: str, tool: BaseTool) -> Read | None:
    """`tool` as a check, or `None` when it takes no parameters (nothing to match)."""
    schema = m.tool_args_schema(tool)
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        return None
    required = schema.get("required")
    need = frozenset(required if isinstance(required, list) else ())
    return Read(name, frozenset(props), need, nouns(name))


def pick(
    reads: tuple[Read, ...], args: Mapping[str, Any], about: frozenset[str]
) -> dict[str, Any] | None:
    """The check for a write about `about` (`nouns`) sent with `args` (see the module's
    docstring), or `None`."""
    best: tuple[int, int, int, str] | None = None
    chosen: Read | None = None
    for read in reads:
        shared, topic = read.params & args.keys(), read.about & about
        if not shared or not topic or not read.required <= args.keys():
            continue
        rank = (-len(topic), -len(shared), len(read.params), read.name)
        if best is None or rank < best:
            best, chosen = rank, read
    if chosen is None:
        return None
    return {"tool": chosen.name, "args": {k: args[k] for k in sorted(chosen.params & args.keys())}}


class Lookups:
    """The reads of one adapter's tools, as checks for its writes. The tools' schemas are
    read on the first check asked for (most adapters never need one); until then the
    adapter's own mapping of its tools is kept, which the adapter holds anyway."""

    __slots__ = ("_reads", "_tools")

    def __init__(self) -> None:
        self._reads: tuple[Read, ...] = ()
        self._tools: tuple[Mapping[str, BaseTool], Callable[[str, BaseTool], bool]] | None = None

    def learn(
        self, tools: Mapping[str, BaseTool], is_read: Callable[[str, BaseTool], bool]
    ) -> None:
        """Know `tools` (name to tool); `is_read` says which are reads (their policy). A
        single tool has no sibling to check with: nothing to learn."""
        self._reads, self._tools = (), (tools, is_read) if len(tools) > 1 else None

    def check_for(
        self, name: str, args: Mapping[str, Any], declared: str | None = None
    ) -> dict[str, Any] | None:
        """The check for the write `name` sent with `args`: the read its policy
        `declared` (`UnknownOutcome.check`), else one of the reads that fits."""
        if self._tools is not None:
            tools, is_read = self._tools
            found = (read_of(n, t) for n, t in tools.items() if is_read(n, t))
            self._reads, self._tools = tuple(r for r in found if r is not None), None
        reads = self._reads
        if declared is not None:
            read = next((r for r in reads if r.name == declared), None)
            taken = frozenset() if read is None else read.params & args.keys()
            return {"tool": declared, "args": {k: args[k] for k in sorted(taken)}}
        if not reads:
            return None
        return pick(tuple(r for r in reads if r.name != name), args, nouns(name))
