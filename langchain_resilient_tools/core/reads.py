"""What a tool reads besides the model's arguments: the inputs that decide whose result
a call may be served.

A tool's answer depends on its arguments and on whatever else it reads. The result
cache and the stale fallback serve one call's result to another, so their key
(`core.key.result_key`) must cover both, or a second user is answered with the first
user's data. The rule, written once here:

- **Declared inputs** are part of every key, as a digest (never the values in clear):
  ``InjectedState("field")`` (that field), ``ToolRuntime`` (its runtime context and
  ``configurable``), a ``config: RunnableConfig`` parameter (the same), a plain
  ``InjectedToolArg`` (its value). The *whole* state (``InjectedState()``, or the state
  a ``ToolRuntime`` carries) is in the key when results cross threads
  (``Cache(scope="global")``); within a thread it is that conversation's own and grows
  with every message, so leaving it out keeps the cache useful and crosses no user.
  ``InjectedStore`` adds nothing: every caller reads the same store, and what it reads
  there is chosen by the other inputs. ``InjectedToolCallId`` and the
  ``idempotency_key`` argument add nothing (they differ on every call by design).
- **Undeclared reads** (``get_config()``, ``get_runtime()``, a context variable) cannot
  be seen. So by default (``Cache(scope="thread")``) a result is shared only with later
  calls of the same thread, run with the same runtime context and ``configurable``
  (`ambient`). ``Cache(scope="global")`` shares across threads and users: safe only when
  the result depends on nothing but the arguments and the declared inputs.
- ``Cache.key`` replaces the arguments and declared inputs with the user's
  own statement of what identifies a result; the scope still applies.

This module does no I/O.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, get_args, get_origin, get_type_hints

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId

from .identity import IdentityCache
from .policy import CacheKeyInfo

if TYPE_CHECKING:
    from .call import Call

log = logging.getLogger(__name__)

RUN_KEYS = frozenset(
    {
        "thread_id",  # the scope itself
        "checkpoint_id",
        "checkpoint_ns",
        "checkpoint_map",
        "run_id",
        "langgraph_request_id",
        "idempotency_key",
        "lrt_deadline",
    }
)
"""``configurable`` keys that change from run to run or step to step without saying
anything about who calls (LangGraph's own ``__``-prefixed keys are left out too)."""

Source = tuple[str, str | None]
"""Where a declared input comes from: ``("state", field or None)``, ``("runtime", None)``,
``("config", None)``, ``("arg", None)``; inputs that decide nothing are not listed."""


def _kind(name: str, hint: Any) -> Source | None:
    """What the parameter `name` annotated `hint` reads, if it is a declared input."""
    from langchain_core.tools.base import _is_injected_arg_type

    if hint is RunnableConfig:
        return ("config", None)
    origin = get_origin(hint) or hint
    if name == "runtime" or getattr(origin, "__name__", "") == "ToolRuntime":
        return ("runtime", None)
    if not _is_injected_arg_type(hint):
        return None
    for meta in get_args(hint)[1:]:
        kind = type(meta).__name__ if not isinstance(meta, type) else meta.__name__
        if kind == "InjectedState":
            field = getattr(meta, "field", None) if not isinstance(meta, type) else None
            return ("state", field)
        if kind == "InjectedStore":
            return None
        if meta is InjectedToolCallId or isinstance(meta, InjectedToolCallId):
            return None
    return None if name == "idempotency_key" else ("arg", None)


def _hints(tool: BaseTool) -> dict[str, Any]:
    hints: dict[str, Any] = {}
    fn = getattr(tool, "func", None) or getattr(tool, "coroutine", None)
    if fn is not None:
        with contextlib.suppress(Exception):  # unresolvable annotations: the schema's
            hints.update(get_type_hints(fn, include_extras=True))
    try:
        from langchain_core.tools.base import get_all_basemodel_annotations

        schema = tool.get_input_schema()
        hints.update(get_all_basemodel_annotations(schema))
    except Exception:  # an unusual schema: the function's annotations
        pass
    hints.pop("return", None)
    return hints


_SOURCES: IdentityCache[dict[str, Source]] = IdentityCache()
"""`declared_inputs` per tool object (held weakly: `core.identity`)."""


def declared_inputs(tool: BaseTool | None) -> dict[str, Source]:
    """The inputs `tool` declares besides the model's arguments, by parameter name."""
    if tool is None:
        return {}
    hit = _SOURCES.get(tool)
    if hit is not None:
        return hit
    found: dict[str, Source] = {}
    for name, hint in _hints(tool).items():
        kind = _kind(name, hint)
        if kind is not None:
            found[name] = kind
    _SOURCES.put(tool, found)
    return found


def runtime_context(call: Call) -> Any:
    """LangGraph's runtime context of the run `call` belongs to, if any."""
    if call.context is not None:
        return call.context
    runtime = ((call.config or {}).get("configurable") or {}).get("__pregel_runtime")
    return getattr(runtime, "context", None)


def configurable(call: Call) -> dict[str, Any]:
    """The run's ``configurable``, less LangGraph's own and per-run keys (`RUN_KEYS`)."""
    found = (call.config or {}).get("configurable") or {}
    return {
        k: v
        for k, v in found.items()
        if isinstance(k, str) and not k.startswith("__") and k not in RUN_KEYS
    }


def ambient(call: Call) -> list[Any]:
    """What any tool can read without declaring it: the runtime context, ``configurable``."""
    return [runtime_context(call), configurable(call)]


def _state_part(state: Any, field: str | None) -> Any:
    if field is None:
        return state
    if isinstance(state, Mapping):
        return state.get(field)
    return getattr(state, field, None)


def declared_reads(call: Call, *, whole_state: bool) -> list[Any]:
    """The values of the inputs `call`'s tool declares, by parameter name (for a digest);
    the whole graph state only when `whole_state` (results shared across threads).

    A wrapped tool inside a graph receives them as injected arguments (`Call.injected`);
    the node and the middleware know them from the request (state, runtime).
    """
    parts: list[Any] = []
    for name, (kind, field) in sorted(declared_inputs(call.tool).items()):
        if kind == "state":
            if field is None and not whole_state:
                continue
            given = call.injected.get(name, _MISSING)
            parts.append([name, _state_part(call.state, field) if given is _MISSING else given])
        elif kind == "runtime":
            rt = call.injected.get(name)
            state = getattr(rt, "state", call.state) if whole_state else None
            parts.append([name, state, *ambient(call)])
        elif kind == "config":
            parts.append([name, *ambient(call)])
        else:
            parts.append([name, call.injected.get(name)])
    return parts


_MISSING = object()


def key_info(call: Call) -> CacheKeyInfo:
    """What a `Cache.key` function receives about `call`."""
    return CacheKeyInfo(
        tool_name=call.name,
        args=dict(call.args),
        thread_id=call.thread_id,
        context=runtime_context(call),
        configurable=configurable(call),
        state=call.state,
    )
