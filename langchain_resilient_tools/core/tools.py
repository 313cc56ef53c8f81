"""Helpers the adapters share to turn their inputs into pipeline calls."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, Tool
from pydantic import BaseModel

from .errors import UsageError
from .identity import IdentityCache

if TYPE_CHECKING:
    from .call import Call

T = TypeVar("T")
INVALID_KEY = "__lrt_invalid__"
"""Marker on a tool call that came from ``AIMessage.invalid_tool_calls``."""


def expect_tool(obj: T, where: str) -> T:
    """`obj` when it is what an adapter takes for a tool (a `BaseTool`, or a function
    ``@tool`` can make one of); else a `UsageError` saying what `where` expected."""
    if isinstance(obj, BaseTool) or (callable(obj) and hasattr(obj, "__name__")):
        return obj
    shown = repr(obj) if len(repr(obj)) <= 60 else repr(obj)[:57] + "..."
    kind = "a callable without a __name__" if callable(obj) else type(obj).__name__
    raise UsageError(
        f"{where} must be a BaseTool or a function (a callable with a __name__, made a "
        f"tool as @tool makes one); got {kind} {shown}"
    )


def expect_tools(tools: Sequence[T], owner: str) -> list[T]:
    """`tools`, each checked by `expect_tool`, with no two of one name (`unique_names`)."""
    checked = [expect_tool(t, f"{owner}: tools[{i}]") for i, t in enumerate(tools)]
    unique_names(checked, owner)
    return checked


def unique_names(tools: Iterable[Any], owner: str) -> None:
    """Refuse two tools with one name (a `UsageError` naming it): LangGraph's `ToolNode`
    keeps the last of them silently, so the model's calls would reach only that one."""
    seen: set[str] = set()
    for t in tools:
        name = t.name if isinstance(t, BaseTool) else getattr(t, "__name__", None)
        if not isinstance(name, str):
            continue
        if name in seen:
            raise UsageError(
                f"{owner}: two tools are named {name!r}; LangGraph's ToolNode would keep "
                "only the last one, silently. Give each tool its own name (e.g. "
                f'@tool("{name}_v2") or tool.name = ...).'
            )
        seen.add(name)


def thread_id_of(config: RunnableConfig | None) -> str | None:
    """The conversation thread of a run, if it has one."""
    if not config:
        return None
    value = (config.get("configurable") or {}).get("thread_id")
    return None if value is None else str(value)


def graph_store(config: RunnableConfig | None) -> Any:
    """The graph's `BaseStore` from a run's config (inside a graph with a store), or `None`."""
    runtime = ((config or {}).get("configurable") or {}).get("__pregel_runtime")
    return getattr(runtime, "store", None)


def step_id_of(config: RunnableConfig | None) -> str | None:
    """The graph step (task) a tool runs in, if any: all calls of one ToolNode step share it."""
    if not config:
        return None
    value = (config.get("configurable") or {}).get("__pregel_task_id")
    return None if value is None else str(value)


def _field_names(schema: Any) -> frozenset[str]:
    if isinstance(schema, dict):
        return frozenset(schema.get("properties", {}))
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return frozenset(schema.model_fields)
    return frozenset()


def _read_injected_keys(tool: BaseTool) -> frozenset[str]:
    try:
        full = _field_names(tool.get_input_schema())
        visible = _field_names(tool.tool_call_schema)
    except Exception:  # an unusual schema: treat every argument as the model's
        return frozenset()
    return (full - visible) | _injected_params(tool)


def _injected_params(tool: BaseTool) -> frozenset[str]:
    """Injected parameters of the tool's function that its schema does not list.

    A tool with a dict (JSON) schema, e.g. an MCP tool, declares ``runtime`` only in
    its coroutine's signature; LangGraph injects it from there, and so must we skip it.
    """
    fn = getattr(tool, "func", None) or getattr(tool, "coroutine", None)
    if fn is None:
        return frozenset()
    try:
        from langchain_core.tools.base import _is_injected_arg_type

        hints = get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable annotations: nothing we can tell
        return frozenset()
    return frozenset(
        name for name, hint in hints.items() if name == "runtime" or _is_injected_arg_type(hint)
    )


_INJECTED: IdentityCache[frozenset[str]] = IdentityCache()
"""`injected_keys` per tool object (held weakly: `core.identity`)."""


def injected_keys(tool: BaseTool | None) -> frozenset[str]:
    """Argument names the runtime injects (state, store, runtime, ...), never the model.

    Read from the tool's schemas once per tool object (it costs tens of µs)."""
    if tool is None:
        return frozenset()
    hit = _INJECTED.get(tool)
    if hit is not None:
        return hit
    keys = _read_injected_keys(tool)
    _INJECTED.put(tool, keys)
    return keys


def split_args(
    tool: BaseTool | None, args: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a tool call's arguments into (the model's, the injected ones)."""
    hidden = injected_keys(tool)
    if not hidden or not hidden.intersection(args):
        return dict(args), {}
    visible = {k: v for k, v in args.items() if k not in hidden}
    return visible, {k: v for k, v in args.items() if k in hidden}


def has_sync(tool: BaseTool) -> bool:
    """Whether the tool can run sync (MCP tools, for one, are async-only)."""
    if isinstance(tool, (StructuredTool, Tool)):
        return tool.func is not None
    return True


def has_native_async(tool: BaseTool) -> bool:
    """Whether the tool has its own coroutine (else async calls run its sync code)."""
    if isinstance(tool, (StructuredTool, Tool)):
        return tool.coroutine is not None
    return type(tool)._arun is not BaseTool._arun


class ToolStandIn:
    """A tool as ToolNode executes it for one call, standing in for `tool`: everything
    a subclass does not override (``invoke``, ``ainvoke``) is the tool's own.

    ToolNode runs ``request.tool.invoke``/``ainvoke``; a request carrying a stand-in
    changes how that one call runs without touching the tool (`core.idempotency._KeyedTool`,
    `runtime.offload.OffloadedTool`, `runtime.offload.BridgedTool`).
    """

    __slots__ = ("_call", "_tool")

    def __init__(self, tool: Any, call: Call) -> None:
        self._tool = tool
        self._call = call

    def __getattr__(self, name: str) -> Any:
        # A slot not yet set (e.g. while copying) must not recurse into `adapters.tool`.
        if name in ToolStandIn.__slots__ or name in type(self).__slots__:
            raise AttributeError(name)
        return getattr(self._tool, name)
