"""What traces record of the layer's hook spans: the ``trace_policy`` settings.

`create_agent` traces each hook of a middleware as a span of its own: LangSmith spans
``ResilientToolsMiddleware.wrap_tool_call`` / ``.wrap_model_call`` (their input is the
request, with the whole conversation in its state; their output the answer), and node
runs ``ResilientToolsMiddleware.before_model`` / ``.after_model`` (the state in; what
the hook changed out). What those spans record is the middleware's ``trace_policy``, a
LangGraph `TracePolicy`, as for LangChain's own middleware (`ToolErrorMiddleware` omits
the input of its spans). `trace_policy` turns a setting into one:

- ``None``: LangChain's default: the process-wide policy of
  ``langchain.agents.middleware.configure_trace_policy``, else everything;
- ``"full"``: everything, even under a process-wide policy;
- ``"redact"``: every text in the payloads through the layer's redaction (secrets
  masked: ``key=value`` pairs, auth schemes, API keys, tokens, URL passwords, private
  keys; values under secret-looking names such as ``password`` or ``api_key``);
- ``"omit"``: spans and their timing kept, payloads recorded as ``{}``;
- a `TracePolicy`: used as it is.

A policy shapes what *tracers* record (LangSmith, any ``BaseTracer``); other callback
handlers and the ``tools`` stream get the real values, as LangGraph gives them. The
tool's own runs (one per attempt) are not hook spans: they record the raw arguments
and results whatever the setting (hide those with the LangSmith client's
``hide_inputs``/``hide_outputs``/``anonymizer``). For a `ResilientToolNode`, the node's
run is traced by LangGraph: pass ``trace_policy=trace_policy("redact")`` to
``add_node``. With ``"omit"`` the middleware's own events and spans (the ``resilience``
callback event, OpenTelemetry) also leave out the one value they can carry, the
rendering of an argument a repair parsed (``parsed 'limit' as integer``).
"""

from __future__ import annotations

import dataclasses
import re
from difflib import get_close_matches
from typing import Any, Literal, TypeAlias

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command, TracePolicy, omit_payload
from pydantic import BaseModel

from ..core.errors import UsageError
from ..text.redact import looks_secret_key, redact

__all__ = [
    "SETTINGS",
    "TraceSetting",
    "redact_payload",
    "trace_policy",
    "traced_by",
    "without_values",
]

TraceSetting: TypeAlias = Literal["full", "redact", "omit"]
"""A named `trace_policy` setting (see the module)."""
SETTINGS: tuple[TraceSetting, ...] = ("full", "redact", "omit")

_MAX_DEPTH = 24
"""Deeper than this a payload is recorded as ``"…"`` (a cycle, or a runaway nesting)."""
_CHUNK = 10_000
"""Texts are redacted in pieces of about this size (redaction bounds its input)."""
_REPAIRED_VALUE = re.compile(r"^(parsed '[^']*') value .* (as [a-z ]+)$", re.DOTALL)
"""A type repair's sentence (`pipeline.repair.logic`): its value is dropped by "omit"."""


def trace_policy(setting: TraceSetting | TracePolicy | None) -> TracePolicy | None:
    """The LangGraph `TracePolicy` of a setting (see the module); `None` for `None`.

    Raises `UsageError` for anything else, naming the closest valid setting."""
    if setting is None or isinstance(setting, TracePolicy):
        return setting
    if setting == "full":
        return TracePolicy()
    if setting == "omit":
        return TracePolicy(process_inputs=omit_payload, process_outputs=omit_payload)
    if setting == "redact":
        return TracePolicy(process_inputs=redact_payload, process_outputs=redact_payload)
    close = get_close_matches(str(setting), SETTINGS, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UsageError(
        f"trace_policy={setting!r} is not a setting: use one of {', '.join(SETTINGS)}, "
        f"a langgraph TracePolicy, or None.{hint}"
    )


def traced_by(setting: TraceSetting | TracePolicy | None, observer: Any) -> TracePolicy | None:
    """The `TracePolicy` of an adapter's `setting` (`trace_policy`), its `observer` told
    what its events keep of a repaired value (all of it, but for ``"omit"``)."""
    policy = trace_policy(setting)
    observer.payloads = "omit" if setting == "omit" else "full"
    return policy


def without_values(repairs: tuple[str, ...]) -> tuple[str, ...]:
    """`repairs` with the value a type repair parsed left out."""
    return tuple(_REPAIRED_VALUE.sub(r"\1 \2", r) for r in repairs)


# -- "redact": every text of a payload through the layer's redaction ------------------


def redact_payload(value: Any) -> Any:
    """`value` with every text redacted (secrets only: paths and code stay, as a trace
    of the conversation needs them) and the values of secret-looking keys masked. Never
    changes `value`; containers, messages and commands are copied."""
    return _walk(value, 0)


def _text(text: str) -> str:
    """`text` as it is, unless redaction finds a secret in it: then redacted, its spacing
    collapsed (piece by piece: a long text keeps its lines but where a secret was)."""
    pieces = []
    rest = text
    while len(rest) > _CHUNK:  # cut at a space, so a secret is not split in two
        cut = rest.rfind(" ", _CHUNK // 2, _CHUNK)
        cut = _CHUNK if cut < 0 else cut + 1
        pieces.append(rest[:cut])
        rest = rest[cut:]
    pieces.append(rest)
    out = []
    for piece in pieces:
        clean = redact(piece, limit=2 * len(piece) + 100, paths=False)
        if clean == " ".join(piece.split()):
            out.append(piece)
        else:  # its spacing collapsed (by `redact`), its ends kept
            body = piece.strip()
            start = piece.index(body[:1]) if body else len(piece)
            out.append(piece[:start] + clean + piece[start + len(body) :])
    return "".join(out) if len(out) > 1 else out[0]


def _masked(key: Any, value: Any) -> bool:
    return (
        isinstance(key, str)
        and looks_secret_key(key)
        and isinstance(value, (str, int, float, bytes))
        and not isinstance(value, bool)
    )


def _walk(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return _text(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth >= _MAX_DEPTH:
        return "…"
    deeper = depth + 1
    if isinstance(value, dict):
        return {k: "***" if _masked(k, v) else _walk(v, deeper) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_walk(v, deeper) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, BaseMessage):
        return _message(value, deeper)
    if isinstance(value, Command):
        return dataclasses.replace(
            value, update=_walk(value.update, deeper), resume=_walk(value.resume, deeper)
        )
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return _walk(fields, depth)  # recorded as a mapping of its fields
    if isinstance(value, BaseModel) and not isinstance(value, BaseTool):  # a tool: as it is
        try:
            return _walk(value.model_dump(), depth)
        except Exception:
            return repr(type(value).__name__)
    return value


def _message(message: BaseMessage, depth: int) -> BaseMessage:
    update: dict[str, Any] = {"content": _walk(message.content, depth)}
    if message.additional_kwargs:
        update["additional_kwargs"] = _walk(message.additional_kwargs, depth)
    if isinstance(message, AIMessage):
        if message.tool_calls:
            update["tool_calls"] = [
                {**tc, "args": _walk(tc["args"], depth)} for tc in message.tool_calls
            ]
        if message.invalid_tool_calls:
            update["invalid_tool_calls"] = [
                {**tc, "args": _walk(tc.get("args"), depth)} for tc in message.invalid_tool_calls
            ]
    artifact = getattr(message, "artifact", None)
    if artifact is not None:
        update["artifact"] = _walk(artifact, depth)
    return message.model_copy(update=update)
