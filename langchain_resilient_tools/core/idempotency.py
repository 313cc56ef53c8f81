"""Idempotency keys: one stable key per logical tool call, handed to write tools.

A service that accepts an idempotency key (payments, bookings, message sends) performs
a request once per key and answers repeats with the first result. Handing a write tool
such a key makes it safe to retry: the retried attempt carries the same key, so the
service charges, books or sends once.

The default key is a digest of (thread id, tool name, tool call id). All three are the
same for every attempt of one call, for the same call run again (the same tool call id
sent twice), and after a resume from a checkpoint: LangGraph persists the tool call ids
in the checkpointed ``AIMessage``, so the re-run node sees the same ids. A different
call, even with the same arguments, gets a different key.

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

import hashlib
import json
import uuid
from typing import TYPE_CHECKING, Any, cast

from langchain_core.tools import BaseTool

from .errors import UsageError
from .policy import IdempotencyInfo
from .tools import ToolStandIn, injected_keys

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest

    from .call import Call

INJECTED_ARG = "idempotency_key"
"""Name of the tool parameter (annotated `InjectedToolArg`) that receives the key."""

CONFIG_KEY = "idempotency_key"
"""Key of the idempotency key in the ``configurable`` of the config the tool is invoked
with (set when the policy declares keys)."""


def derive_key(thread_id: str | None, tool_name: str, tool_call_id: str) -> str:
    """The default key: a 32-hex-digit digest of (thread id, tool name, tool call id)."""
    text = json.dumps(["lrt-idem-v1", thread_id, tool_name, tool_call_id])
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def takes_key(tool: BaseTool | None) -> bool:
    """Whether `tool` declares the injected ``idempotency_key`` parameter."""
    return tool is not None and INJECTED_ARG in injected_keys(tool)


def key_for(call: Call) -> str:
    """The idempotency key of `call`: built once, then the same for every attempt.

    Uses the policy's callable when ``ToolPolicy.idempotency_key`` is one, else
    `derive_key`. A call without an id (never the case for model tool calls) gets a
    random key, so that two such calls are never mistaken for one.
    """
    key = call.idempotency_key  # built once: every attempt reuses it
    if key is None:
        builder = call.resolved.policy.idempotency_key
        if callable(builder):
            info = IdempotencyInfo(call.name, dict(call.args), call.thread_id, call.id)
            key = builder(info)
            if not isinstance(key, str) or not key:
                raise UsageError(
                    f"the idempotency_key callable of {call.name!r} must return a non-empty str"
                )
        elif call.id:
            key = derive_key(call.thread_id, call.name, call.id)
        else:
            key = uuid.uuid4().hex
        call.idempotency_key = key
    return str(key)


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
