"""Prompt text that teaches a model to read this package's tool error envelope.

Add `TOOL_ERROR_GUIDANCE` to the system prompt of an agent whose tools run through
the pipeline, or let `with_tool_error_guidance` append it::

    from langchain_resilient_tools.prompts import with_tool_error_guidance

    agent = create_agent(model, tools, system_prompt=with_tool_error_guidance("You are ..."))
"""

from __future__ import annotations

from .core.errors import ToolErrorType

__all__ = ["ERROR_TYPE_GUIDANCE", "TOOL_ERROR_GUIDANCE", "with_tool_error_guidance"]

ERROR_TYPE_GUIDANCE: dict[str, str] = {
    "invalid_arguments": 'the arguments did not fit; fix each one listed in "fields" '
    '("dropped" names arguments the tool does not take) and call again as '
    '"suggestion" shows.',
    "malformed_call": "your arguments were not a valid JSON object; send the call again "
    "with complete, valid JSON.",
    "unknown_tool": 'no tool has that name; use one of "valid_tools" ("closest" is the likeliest).',
    "timeout": "the tool did not answer in time; try again later or with a narrower request.",
    "unknown_outcome": "the action may or may not have happened. Before doing it again, "
    "check whether it took effect (for example with a get, list or search tool); if you "
    "cannot check, tell the user it is uncertain.",
    "transient_failure": "the service was unavailable; calling again later may work.",
    "rate_limited": 'the service is rate limiting; wait "retry_after_s" seconds (if '
    "given) before calling it again, and make fewer calls.",
    "tool_error": 'the tool refused or failed; read "message", change the request, or '
    "take another approach.",
    "circuit_open": "the tool is switched off after repeated failures and was not called; "
    'do not call it again before "retry_after_s" seconds; use another way meanwhile.',
    "duplicate_call": "you already made this exact call. Use the earlier result instead "
    "of calling again.",
    "low_quality_result": "the tool answered but the result was empty or useless; try "
    "different arguments.",
    "internal_error": "something failed on our side; do not repeat the call unchanged.",
    "not_run": "the run that made the call stopped before the call was carried out; "
    "nothing was done, and you may send it again if you still need it.",
}
"""One line of guidance per ``error`` value (`ToolErrorType`), keyed by the value; the
guidance lists those of the `ToolErrorType` members this version has."""

_INTRO = """\
How to read tool failures:
- A tool that failed answers with a JSON object instead of its result, e.g.
  {"error": "timeout", "tool": "...", "message": "...", "suggestion": "...", \
"retryable": true, "attempts": 2}.
  "message" says what went wrong; "suggestion" says what to do next.
- Never make up, guess or fill in a result for a call that failed. Use only what tools \
actually returned.
- "retryable": true means the same call may work if you make it again later; false \
means repeating it unchanged will not help: fix the arguments it names, or take \
another approach.
- What each "error" means:"""

_OUTRO = """\
- A result that starts with a note in [square brackets] (for example a stale or \
reused result) is real but comes with that caveat; pass the caveat on when it matters.
- When a tool failed and you could not get around it, tell the user plainly which step \
failed and what could not be done."""


def _guidance() -> str:
    lines = [
        f'  "{kind.value}": {ERROR_TYPE_GUIDANCE[kind.value]}'
        for kind in ToolErrorType
        if kind.value in ERROR_TYPE_GUIDANCE
    ]
    return "\n".join([_INTRO, *lines, _OUTRO])


TOOL_ERROR_GUIDANCE = _guidance()
"""Guidance for the system prompt: what the error envelope means and how to act on it.

Covers: never inventing a result after an error, when calling again can help
(``retryable``), what each error type asks of the model, marked results, and telling the
user plainly when a tool failed."""


def with_tool_error_guidance(system_prompt: str | None) -> str:
    """`system_prompt` with `TOOL_ERROR_GUIDANCE` appended (once; `None` gives the guidance).

    Applying it to a prompt that already contains the guidance returns that prompt
    unchanged, so it is safe to call more than once.
    """
    if not system_prompt or not system_prompt.strip():
        return TOOL_ERROR_GUIDANCE
    if TOOL_ERROR_GUIDANCE in system_prompt:
        return system_prompt
    return f"{system_prompt.rstrip()}\n\n{TOOL_ERROR_GUIDANCE}"
