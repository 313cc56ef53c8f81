"""Idempotency keys: one stable key per logical tool call, handed to write tools.

A service that accepts an idempotency key (payments, bookings, message sends) performs
a request once per key and answers repeats with the first result. Handing a write tool
such a key makes it safe to retry: the retried attempt carries the same key, so the
service charges, books or sends once.

The default key (`derive_key`) is a digest of the thread id, the tool name, the tool
call id and, in a graph, where the call was issued (`core.resume.position`). It is the
same for every attempt of one call (retries, a keyed orphaned write sent again) and for a
run that resumes the call; a new call gets a new key, even when the model reuses a tool
call id (local and fake models, and some providers, send ``call_0`` in every turn).
What tells a resume from a new call depends on where the call runs:

- **a graph with a checkpointer** (a thread): the step of the thread, its checkpoint
  namespace without task ids and its step number (``tools@3``, `core.resume.step_of`,
  the journal's key). A run that resumes the thread (after an interrupt, a crash, a
  killed worker, on another replica) runs its pending step again at that position with
  the same tool call ids (they are in the checkpointed ``AIMessage``): the same key, so
  the service carries the resent request out once. A new turn runs its tools at a later
  step: a new key.
- **a graph without a checkpointer**: the graph task that runs the call. Nothing can
  resume such a run, so every run is a new request; a node retried by LangGraph
  (``retry_policy=``) runs in the same task and keeps its key.
- **outside a graph** (a `ResilientTool` or a tool invoked directly): the thread id (if
  any) and the tool call id alone, which the caller chose. Sending the same tool call id
  again is a resend (the same key: what a caller resending after its own crash needs);
  a caller that reuses ids for new calls gives each conversation its own thread id,
  passes the key itself (an ``idempotency_key`` argument to a direct invocation) or
  builds keys with a callable (``ToolPolicy(idempotency_key=fn)``, which receives the
  position as `IdempotencyInfo.position`). A per-process random part would make the
  resend after a crash a new request: the one case the key exists for.

How a tool receives its key: it declares a parameter

    idempotency_key: Annotated[str, InjectedToolArg]

(`langchain_core.tools.InjectedToolArg`). The parameter is left out of the schema the
model sees, and every adapter adds the key to the executed arguments (`with_key`):
`ResilientTool` to the arguments it executes its tool with (`execution_args`), the node
and the middleware at ToolNode's last step (`keyed_request`), since ToolNode strips any
``InjectedToolArg`` value from a tool call's arguments. A value the model sends under
that name is dropped or replaced. When the policy declares keys, the key is also in
``config["configurable"]["idempotency_key"]`` of the `RunnableConfig` the tool is
invoked with (a tool with a ``config: RunnableConfig`` parameter reads it there). The key never
goes into a message, an envelope, a ``tool_errors`` record or a schema.

This module does no I/O; it imports `Call` only for typing so that `core.policy` can use
`IdempotencyInfo`.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any, cast

from langchain_core.tools import BaseTool

from .digest import hex_digest
from .errors import UsageError
from .policy import IdempotencyInfo
from .resume import position
from .tools import ToolStandIn, injected_keys

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest

    from .call import Call

INJECTED_ARG = "idempotency_key"
"""Name of the tool parameter (annotated `InjectedToolArg`) that receives the key."""

CONFIG_KEY = "idempotency_key"
"""Key of the idempotency key in the ``configurable`` of the config the tool is invoked
with (set when the policy declares keys)."""


def derive_key(
    thread_id: str | None, tool_name: str, tool_call_id: str, position: str | None = None
) -> str:
    """The default key: a 32-hex-digit digest of (thread id, tool name, tool call id) and
    the call's `position` in its run (`core.resume.position`; `None` outside a graph)."""
    if type(thread_id) is str and type(tool_call_id) is str and type(tool_name) is str:
        # the same text as json.dumps(parts), without building an encoder for it
        at = "" if position is None else f", {_json_str(position)}"
        text = f'["lrt-idem-v1", {_json_str(thread_id)}, {_json_str(tool_name)}, {_json_str(tool_call_id)}{at}]'
    else:
        parts = ["lrt-idem-v1", thread_id, tool_name, tool_call_id]
        if position is not None:
            parts.append(position)
        text = json.dumps(parts)
    return hex_digest(text, 16)


_json_str = json.encoder.encode_basestring_ascii
"""A str as `json.dumps` writes it (ASCII, escaped)."""


def takes_key(tool: BaseTool | None) -> bool:
    """Whether `tool` declares the injected ``idempotency_key`` parameter."""
    return tool is not None and INJECTED_ARG in injected_keys(tool)


def key_for(call: Call, where: str | None = None) -> str:
    """The idempotency key of `call`: built once, then the same for every attempt;
    `where`: its position (`core.resume.position`), when the caller has it.

    Uses the policy's callable when ``ToolPolicy.idempotency_key`` is one, else
    `derive_key` with the call's position (see the module's docstring). A call without
    an id (never the case for model tool calls) gets a random key, so that two such
    calls are never mistaken for one.
    """
    key = call.idempotency_key  # built once: every attempt reuses it
    if key is None:
        if call.id or call.resolved.key_builder is not None:
            key = key_for_call(call, call.id, where or position(call))
        else:
            key = uuid.uuid4().hex
        call.idempotency_key = key
    return key


def key_for_call(call: Call, call_id: str, where: str | None) -> str:
    """The idempotency key of the tool call `call_id`, issued at `where`, to `call`'s
    tool with `call`'s arguments in its thread: `call`'s own key (`key_for`), or, for a
    write the model sends again after its outcome was unknown, the key of the call it
    repeats (`pipeline.dedup`), so the service sees one request."""
    builder = call.resolved.key_builder
    if builder is None:
        return derive_key(call.thread_id, call.name, call_id, where)
    key = builder(IdempotencyInfo(call.name, dict(call.args), call.thread_id, call_id, where))
    if not isinstance(key, str) or not key:
        raise UsageError(
            f"the idempotency_key callable of {call.name!r} must return a non-empty str"
        )
    return key


def use_key(call: Call, key: str) -> None:
    """Give `call` a key chosen by the developer (a direct `ResilientTool` invocation)."""
    call.idempotency_key = key


def known_key(call: Call) -> str | None:
    """The key of `call` if one was built (for scrubbing it from error text)."""
    return call.idempotency_key


def with_key(call: Call, args: dict[str, Any]) -> dict[str, Any]:
    """`args` plus the call's key when its tool declares the parameter: the one place
    where the key is added to what a tool is executed with."""
    if not takes_key(call.tool):
        return args
    return {**args, INJECTED_ARG: key_for(call)}


def declared(call: Call) -> bool:
    """Whether the call's policy declares that its service honours keys."""
    return call.resolved.keyed


def keyed_config(call: Call, config: Any) -> Any:
    """`config` (a RunnableConfig, or None) with the key under ``configurable`` when the
    policy declares it; the tool reads it there if it takes a ``config`` parameter."""
    if not declared(call):
        return config
    base = dict(config or {})
    base["configurable"] = {**(base.get("configurable") or {}), CONFIG_KEY: key_for(call)}
    return base


def execution_args(call: Call) -> dict[str, Any]:
    """The arguments `ResilientTool` executes its tool with: the model's, the injected
    ones and, via `with_key`, the idempotency key."""
    return with_key(call, {**call.args, **call.injected})


class _KeyedTool(ToolStandIn):
    """`tool` as ToolNode executes it, with the call's key added to its input.

    ToolNode strips every ``InjectedToolArg`` value from a tool call's arguments (so
    that a model cannot forge one) and injects only state, store and runtime. The key
    is ours, not the model's, so it is put back here, at the last step: ToolNode's
    ``tool.invoke(call_args, config)``. Everything else is the tool's own.
    """

    __slots__ = ()

    def _keyed(self, input: Any) -> Any:
        if isinstance(input, dict) and input.get("type") == "tool_call":
            return {**input, "args": with_key(self._call, dict(input.get("args") or {}))}
        if isinstance(input, dict):
            return with_key(self._call, input)
        return input

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        return self._tool.invoke(self._keyed(input), keyed_config(self._call, config), **kwargs)

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        config = keyed_config(self._call, config)
        return await self._tool.ainvoke(self._keyed(input), config, **kwargs)


def keyed_request(request: ToolCallRequest, call: Call, tool_call: Any) -> ToolCallRequest:
    """`request` to execute `call` with ToolNode (node and middleware adapters): with
    `tool_call`, and with its tool keyed (`_KeyedTool`) when it takes the key or its
    policy declares one."""
    tool = request.tool
    if tool is None or not (declared(call) or takes_key(tool)):
        if tool_call is request.tool_call:
            return request  # nothing changed: no copy on the hot path
        return request.override(tool_call=tool_call)
    return request.override(tool_call=tool_call, tool=cast(BaseTool, _KeyedTool(tool, call)))


def scrub(text: str, call: Call) -> str:
    """`text` with the call's idempotency key (if any) masked."""
    key = known_key(call)
    return text.replace(key, "***") if key else text
