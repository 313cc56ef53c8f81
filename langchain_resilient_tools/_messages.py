"""Model-facing wording: every sentence the model may read is a constant here.

Messages say what happened and why; hints say what to do next. Infrastructure
failures never ask the model to "fix its mistakes".
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool

TIMEOUT = "{tool} did not answer within {timeout:g} s."
TIMEOUT_HINT = "Try again later or with a narrower query."

UNKNOWN_OUTCOME_TIMEOUT = (
    "{tool} did not answer within {timeout:g} s. The action may or may not have taken effect, "
    "so it was not repeated."
)
UNKNOWN_OUTCOME_FAILURE = (
    "{tool} lost contact with its service ({kind}) before confirming the result. The action "
    "may or may not have taken effect, so it was not repeated."
)
UNKNOWN_OUTCOME_HINT = (
    "Do not repeat this call blindly: first check whether it took effect (for example with a "
    "read, get or list tool), then tell the user what you found."
)

TRANSIENT = "{tool} failed because a service it depends on is unavailable right now ({kind})."
BUSY = "{tool} is still busy with {n} earlier calls that did not finish, so it was not called."
TRANSIENT_HINT = (
    "Try again in a little while; if it keeps failing, tell the user the service is unavailable."
)

TOOL_ERROR = "{tool} reported an error: {text}"
TOOL_ERROR_OPAQUE = "{tool} failed with an unexpected error ({kind})."
TOOL_ERROR_HINT = (
    "Read the error, then call again with corrected arguments or choose another approach; "
    "do not invent a result."
)

UNKNOWN_TOOL = "There is no tool named '{tool}'."
UNKNOWN_TOOL_CLOSEST = "Did you mean '{closest}'?"
UNKNOWN_TOOL_HINT = "Call one of the available tools: {valid}."

MALFORMED = "The arguments of this call to {tool} could not be read as a JSON object: {reason}."
MALFORMED_HINT = "Send the call again with the arguments as one valid JSON object: {signature}."

INVALID_ARGS = (
    "The arguments for {tool} do not fit its schema ({n} problem(s), listed in 'fields')."
)
INVALID_ARGS_HINT = "Call it again with arguments of this form: {signature}."

CIRCUIT_OPEN = "{tool} is temporarily switched off after repeated failures of its service."
CIRCUIT_OPEN_HINT = (
    "Do not call {tool} for about {s:.0f} s; use another tool, or tell the user the service "
    "is unavailable."
)

DUPLICATE = (
    "This exact call to {tool} was already made ({n} time(s) before), so it was not run again."
)
DUPLICATE_LOOPING = (
    "This exact call to {tool} has now been repeated {n} times. You are going in circles."
)
DUPLICATE_HINT = (
    "Use the earlier result instead of repeating the call; if you need something different, "
    "change the arguments."
)

LOW_QUALITY = "{tool} answered, but the result is not useful: {reason}."
LOW_QUALITY_HINT = "Try a different or broader query, or another tool."

INTERNAL = "Handling this call to {tool} failed inside the resilience layer."
INTERNAL_HINT = "Try the call again once; if it fails again, tell the user the tool is unavailable."


def _type_name(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"][:8])
    if "anyOf" in schema:
        return " | ".join(_type_name(s) for s in schema["anyOf"] if s.get("type") != "null")
    t = schema.get("type")
    if t == "array" and isinstance(schema.get("items"), dict):
        return f"array of {_type_name(schema['items'])}"
    return str(t or "any")


def tool_args_schema(tool: BaseTool | None) -> dict[str, Any]:
    """The JSON schema of the arguments the model may send (injected ones excluded)."""
    if tool is None:
        return {}
    try:
        schema: Any = tool.tool_call_schema
        if isinstance(schema, dict):
            return schema
        return dict(schema.model_json_schema())
    except Exception:  # a schema we cannot render must not break an error message
        return {}


def signature(tool: BaseTool | None, name: str) -> str:
    """A compact call form, e.g. ``get_weather(city: string, days?: integer)``."""
    schema = tool_args_schema(tool)
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    parts = [
        f"{key}{'' if key in required else '?'}: {_type_name(sub)}" for key, sub in props.items()
    ]
    return f"{name}({', '.join(parts)})"
