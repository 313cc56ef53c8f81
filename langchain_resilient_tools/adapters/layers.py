"""Other layers on a tool call's way: where two would both retry one call.

LangChain and LangGraph ship layers of their own (`ToolRetryMiddleware`,
`ToolErrorMiddleware`, a node's ``retry_policy=``). Around ours they are harmless: we
never raise for a tool's failure, so an outer retry has nothing to retry. Inside ours
they multiply or hide:

- a `ToolRetryMiddleware` inside ours (after `ResilientToolsMiddleware` in
  `create_agent`'s ``middleware=[...]``, or a `ResilientToolNode`'s ``wrap_tool_call=``)
  runs each of our attempts again itself, where we cannot see it. For a write that
  breaks invariant 2 (a connection reset after sending makes three orders), so a write
  it covers is refused (`UsageError`, before any tool runs); for reads it only multiplies
  attempts beyond our budget, and is said once (a log warning naming both layers).
- a `ToolErrorMiddleware` inside ours turns a tool's exceptions into messages before we
  see them: nothing is retried, a write that failed after sending is not reported as an
  unknown outcome. Said once.
- LangGraph's ``retry_policy=`` on the node runs the whole step again after the node
  raised (its ``timeout=`` raises ``NodeTimeoutError``, which it retries): seen at run
  time as ``execution_info.node_attempt > 1``, said once. Writes that already ran are
  answered by the dedup ledger and the journal, not run again.

`create_agent` keeps the middleware list to itself: the layers inside ours are found by
walking the ``handler`` the first tool call hands us (the chain's closures, down to each
middleware's bound hook). Nothing found is the safe answer: the walk only ever adds a
refusal or a warning, never changes how a call runs.
"""

from __future__ import annotations

import functools
import logging
import types
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.errors import UsageError
from ..core.policy import PolicyResolver

log = logging.getLogger(__name__)

RETRY = "ToolRetryMiddleware"
ERRORS = "ToolErrorMiddleware"
WALK_LIMIT = 64
"""Callables visited at most when looking for the layers inside ours."""

WRITE_RETRIED = (
    "{retry} sits inside {ours} ({where}), where {ours} cannot see its retries: {tools} "
    "would run up to {times} times for one call whenever an attempt raises, e.g. when a "
    "connection resets after the request was sent, and a tool that is not idempotent must "
    "run at most once per call. {fix}"
)
READS_RETRIED = (
    "%s sits inside %s (%s): each of our attempts of %s is retried by it up to %d more "
    "times, beyond our retry budget (retry multiplication). %s"
)
ERRORS_INSIDE = (
    "%s sits inside %s (%s): it turns a tool's exceptions into messages before we see "
    "them, so a transient failure of a read is not retried and a write that failed after "
    "sending is reported as an error, not as an unknown outcome. %s"
)
NODE_RERUN = (
    "LangGraph ran node %r again (attempt %d: the node's retry_policy, e.g. after its "
    "timeout=): every call of the step runs again; writes that already ran are answered "
    "by the dedup ledger and the journal, not run again. %s retries each call itself "
    "(ToolPolicy(retry=...)); a RetryPolicy on its node only adds attempts, and a node "
    "timeout= should exceed the calls' deadline (by default 2 x timeout + 1 s) so that "
    "they are answered before it."
)
FIXES = {
    ("middleware", RETRY): (
        "Drop it (ResilientToolsMiddleware retries reads itself: ToolPolicy(retry="
        "RetryPolicy(...))), or put it before ResilientToolsMiddleware in create_agent's "
        "middleware=[...], where it only sees what we raise for the graph's author."
    ),
    ("middleware", ERRORS): (
        "Put it before ResilientToolsMiddleware in create_agent's middleware=[...], where "
        "it only sees what we raise for the graph's author, or drop it."
    ),
    ("node", RETRY): (
        "Drop it from the node's wrap_tool_call: the node retries reads itself "
        "(ToolPolicy(retry=RetryPolicy(...)))."
    ),
    ("node", ERRORS): (
        "Drop it from the node's wrap_tool_call: the node answers a tool's exceptions itself."
    ),
}
"""How to fix each inner layer, per adapter (``middleware`` or ``node``)."""


def _kind(obj: object, name: str) -> bool:
    """Whether `obj` is a langchain `name` (or a subclass), without importing langchain."""
    return any(
        c.__name__ == name and c.__module__.startswith("langchain.") for c in type(obj).__mro__
    )


def _is_middleware(obj: object) -> bool:
    return _kind(obj, "AgentMiddleware")


def inner_layers(*handlers: Any, skip: object = None) -> list[object]:
    """The middleware objects whose hooks `handlers` call, however deep (not `skip`).

    Follows functions' closures, ``__wrapped__`` (tracing decorators) and partials; stops
    at a middleware's bound hook (the layers inside it are in the chain's own closures).
    """
    found: list[object] = []
    seen: set[int] = set()
    stack = [h for h in handlers if h is not None]
    while stack and len(seen) < WALK_LIMIT:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        owner = getattr(fn, "__self__", None)
        if _is_middleware(owner):
            if owner is not skip and all(owner is not f for f in found):
                found.append(owner)
            continue
        wrapped = getattr(fn, "__wrapped__", None)
        if wrapped is not None:
            stack.append(wrapped)
            continue
        if isinstance(fn, functools.partial):
            stack.append(fn.func)
            continue
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)):
                stack.append(value)
    return found


def _covers(layer: object, tool_name: str) -> bool:
    """Whether a `ToolRetryMiddleware` would retry `tool_name` at all."""
    if int(getattr(layer, "max_retries", 1) or 0) <= 0:
        return False
    should = getattr(layer, "_should_retry_tool", None)
    return bool(should(tool_name)) if callable(should) else True


class Layers:
    """What one adapter knows of the layers inside it; each warning said once."""

    def __init__(self, resolver: PolicyResolver, adapter: str) -> None:
        self.resolver = resolver
        self.adapter = adapter
        """``middleware`` or ``node``: where an inner layer sits and how to fix it."""
        node = adapter == "node"
        self.ours = "ResilientToolNode" if node else "ResilientToolsMiddleware"
        self.where = (
            "in the node's wrap_tool_call" if node else "after it in create_agent's middleware list"
        )
        self.retries: list[object] | None = None
        """The inner retry layers (`None`: not looked for yet)."""
        self._checked: set[str] = set()
        self._said: set[str] = set()

    def find(self, *handlers: Any, skip: object = None) -> None:
        """Look for the layers inside ours once (the chain of one agent does not change)."""
        if self.retries is not None:
            return
        layers = inner_layers(*handlers, skip=skip)
        self.retries = [layer for layer in layers if _kind(layer, RETRY)]
        errors = next((layer for layer in layers if _kind(layer, ERRORS)), None)
        if errors is not None:
            self._say(ERRORS, ERRORS_INSIDE, ERRORS, self.ours, self.where, self._fix(ERRORS))

    def guard(self, request: Any, handler: Any, ours: object) -> None:
        """At a tool call under `create_agent`: look for the layers inside `ours` (once),
        then refuse a write an inner retry layer covers (every call, until fixed)."""
        self.find(handler, skip=ours)
        if self.retries:
            tools = tools_of(request.runtime)
            if request.tool is not None:
                tools.setdefault(request.tool_call["name"], request.tool)
            self.check(tool_names_of(request.runtime, request.tool_call["name"]), tools)

    def check(self, tool_names: Iterable[str], tools: Mapping[str, Any] | None = None) -> None:
        """Refuse a write that an inner retry layer covers; say once that reads are.
        `tools` (name to tool) lets a tool's MCP annotations take part, as in a call."""
        if not self.retries:
            return
        new = [n for n in tool_names if n not in self._checked]
        if not new:
            return
        for layer in self.retries:
            covered = [n for n in new if _covers(layer, n)]
            writes = [
                n for n in covered if not self.resolver.resolve(n, (tools or {}).get(n)).idempotent
            ]
            if writes:
                raise UsageError(
                    WRITE_RETRIED.format(
                        retry=RETRY, ours=self.ours, where=self.where,
                        tools=", ".join(sorted(writes)), fix=self._fix(RETRY),
                        times=int(getattr(layer, "max_retries", 1)) + 1,
                    )
                )  # fmt: skip
            if covered:
                self._say(
                    RETRY, READS_RETRIED, RETRY, self.ours, self.where,
                    ", ".join(sorted(covered)), int(getattr(layer, "max_retries", 1)),
                    self._fix(RETRY),
                )  # fmt: skip
        self._checked.update(new)

    def note_rerun(self, runtime: Any, node: str) -> None:
        """Say once that LangGraph ran the node again (its ``retry_policy=``), as the
        `runtime` of one of its calls says."""
        info = getattr(runtime, "execution_info", None)
        attempt = getattr(info, "node_attempt", 1)
        if isinstance(attempt, int) and attempt > 1:
            self._say("node", NODE_RERUN, node, attempt, self.ours)

    def _fix(self, layer: str) -> str:
        return FIXES[(self.adapter, layer)]

    def _say(self, what: str, template: str, *args: Any) -> None:
        if what in self._said:
            return
        self._said.add(what)
        log.warning(template, *args)


def tools_of(runtime: Any) -> dict[str, Any]:
    """The agent's tools by name, as its runtime lists them."""
    tools: Iterable[Any] = getattr(runtime, "tools", None) or ()
    return {t.name: t for t in tools if isinstance(getattr(t, "name", None), str)}


def tool_names_of(runtime: Any, current: str) -> list[str]:
    """Every tool the agent has (as its runtime lists them), the current one first."""
    tools: Iterable[Any] = getattr(runtime, "tools", None) or ()
    names = [t.name for t in tools if isinstance(getattr(t, "name", None), str)]
    return list(dict.fromkeys([current, *names]))
