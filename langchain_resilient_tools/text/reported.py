"""Errors a tool reports, and how their text is shown to the model.

A tool reports an error by raising it, or by *returning* it (`error_result`: its own
``handle_tool_error`` answer, an MCP ``isError`` result, a text that reads as an error
report). Whose text the model reads decides what `redacted` takes out of it
(`text.redact`'s docstring states the rule). An exception's text (a ``ToolException``,
a ``ValueError``) is the tool's internals talking: every host path goes but the ones the
model sent. A text a server or tool wrote for the model, `ReportedError` and
`HandledByTool` (rendered by `text.envelope` as the tool gave it), loses only what is an
internal of the server: code locations (a source file with a line number), traceback
fragments and the host paths it would lose as exception text, but not the paths it names
as where the call may go (a filesystem server's "allowed directories"). Either way
secrets go, the paths the model sent stay, and the tool's name and argument names are
not taken for secret keys.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import ToolException

from ..core.call import Call
from ..core.errors import HandledByTool, ReportedError
from ..core.idempotency import scrub
from . import messages as m
from .redact import looks_secret_key, redact

ERROR_TEXT_PREFIXES: tuple[str, ...] = ("Error: ", "Database error: ", "Error executing tool ")
"""How a result text that is an error report begins (the MCP reference servers, e.g.
mcp-server-sqlite, answer a failed query with a plain ``Database error: ...`` text and no
``isError``). Only the start of the whole answer counts: a result that merely mentions an
error elsewhere is a success."""

_MAX_ERROR_TEXT = 2000
"""A longer answer is a result, whatever its first words."""


def _text_of(content: Any) -> str | None:
    """The text of a tool's answer: a string, or a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b if isinstance(b, str) else b.get("text", "") for b in content if b]
        return " ".join(p for p in parts if isinstance(p, str) and p)
    return None


def _reads_as_error(content: Any) -> str | None:
    """The text of `content` if it is a single text that reads as an error report."""
    if isinstance(content, list):  # one text block; not a list of Commands/ToolMessages
        if len(content) != 1:
            return None
        block = content[0]
        if isinstance(block, dict):
            if block.get("type") != "text":
                return None
            content = block.get("text")
        elif not isinstance(block, str):
            return None
        else:
            content = block
    ok = isinstance(content, str) and len(content) <= _MAX_ERROR_TEXT
    return content if ok and content.startswith(ERROR_TEXT_PREFIXES) else None


def written_for_model(exc: BaseException) -> bool:
    """Whether `exc` is an error the tool wrote for the model: `ReportedError`, or the
    exception langchain-mcp-adapters raises for an ``isError`` result (it carries the
    result's ``tool_content``), whichever way the tool was called."""
    if isinstance(exc, ReportedError):
        return True
    return isinstance(exc, ToolException) and isinstance(getattr(exc, "tool_content", None), list)


def error_result(value: Any, *, detect_text: bool = True) -> ToolException | None:
    """The error a tool reported by *returning* it, if it did.

    A tool with ``handle_tool_error`` (MCP tools report ``isError`` results this way)
    answers with a ``ToolMessage(status="error")``; with `detect_text`, an answer whose
    whole text reads as an error report (`ERROR_TEXT_PREFIXES`) counts too. Either
    becomes a ``tool_error`` like a raised `ToolException`.
    """
    if isinstance(value, ToolMessage):
        if value.status == "error":  # the tool's own handler answered: its answer stands
            return HandledByTool(_text_of(value.content) or "", value)
        value = value.content
    elif not isinstance(value, (str, list)):
        return None
    if not detect_text:
        return None
    text = _reads_as_error(value)
    return None if text is None else ReportedError(text)


def _strings(args: Any) -> list[tuple[bool, str]]:
    """The string values of the model's arguments (nested too), each with whether it is
    held by a secret-looking name (or inside one)."""
    out: list[tuple[bool, str]] = []
    stack: list[tuple[bool, str, Any]] = [(False, "", args)]
    while stack and len(out) < 100:
        secret, key, value = stack.pop()
        secret = secret or bool(key and looks_secret_key(key))
        if isinstance(value, str):
            out.append((secret, value))
        elif isinstance(value, dict):
            stack.extend((secret, str(k), v) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((secret, key, v) for v in value)
    return out


def redacted(text: str, call: Call, *, limit: int = 300, for_model: bool = False) -> str:
    """`text`, said about `call`, as the model may see it (`text.redact` states the rule).

    An exception's text loses every path the model did not send; a text a server or tool
    wrote for the model (`for_model`: an MCP ``isError`` result, the tool's own
    ``handle_tool_error`` answer, an answer that reads as an error report) loses the
    server's internals only: code locations, traceback fragments and host paths, but not
    the paths it names as where the call may go (a filesystem server's allowed
    directories). Either way the values the model sent stay (what it sent under a
    secret-looking name is masked wherever it appears), and the tool's name and its
    argument names are not taken for secrets: the word after one stays.
    """
    strings = _strings(call.args)
    props = m.tool_args_schema(call.tool).get("properties")
    names = [call.name, *(props if isinstance(props, dict) else ())]
    return redact(
        scrub(text, call),
        limit=limit,
        keep=[v for secret, v in strings if not secret],
        paths="internal" if for_model else True,
        names=names,
        secrets=[v for secret, v in strings if secret],
    )
