"""Model-facing wording: every sentence the model may read is a constant here.

Messages say what happened and why; hints say what to do next. Infrastructure
failures never ask the model to "fix its mistakes".
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool

TIMEOUT = "{tool} did not answer within {timeout:g} s."
TIMEOUT_HINT = "Try again later or with a narrower query."
NODE_TIME_LIMIT = (
    "That was all the time this step had left: the graph gives its tool step {limit:g} s, "
    "and the answer had to be written before then."
)
NODE_TIME_LIMIT_HINT = (
    "Try again with a narrower request, or split the work into smaller calls: each step "
    "of tool calls has {limit:g} s."
)

DRAINED = (
    "{tool} was not run: the server running this agent is shutting down, so no new work "
    "was started. Nothing was done."
)
DRAINED_NOT_RETRIED = "It was not tried again: the server running this agent is shutting down."
DRAINED_HINT = "Send the same call to {tool} again once the run resumes: it is safe to repeat."

UNKNOWN_OUTCOME_TIMEOUT = (
    "{tool} did not answer within {timeout:g} s. The action may or may not have taken effect, "
    "so it was not sent again."
)
UNKNOWN_OUTCOME_FAILURE = (
    "{tool} lost contact with its service ({kind}) before confirming the result. The action "
    "may or may not have taken effect, so it was not sent again."
)
UNKNOWN_OUTCOME_RERUN_FAILED = (
    "{tool} did not confirm the result, twice: a lookup found that the first attempt had not "
    "taken effect, so it was sent once more, and that attempt failed too ({kind}). The action "
    "may or may not have taken effect now, so it was not sent a third time."
)
UNKNOWN_OUTCOME_RERUN = (
    "{tool} ran for this call before and did not confirm the result. The action may or may "
    "not have taken effect, so it was not run again."
)
ORPHANED_WRITE = (
    "{tool} was started for this call {age} ago by a worker that stopped before it "
    "confirmed the result. The action may or may not have taken effect, so it was not run "
    "again."
)
WRITE_IN_FLIGHT = (
    "{tool} is still being run for this call by another worker, which has not confirmed "
    "the result yet. It was not run again."
)
JOURNAL_UNREADABLE = (
    "{tool} was not run: the journal that records whether this call already ran (before a "
    "restart) could not be read, so the action may or may not have taken effect already."
)
JOURNAL_RESENT = (
    "This call was started before the run was resumed and its worker stopped before it "
    "confirmed; it was sent again with the same idempotency key, so the service carries it "
    "out once."
)
JOURNAL_RESENT_SAFE = (
    "This call was started before the run was resumed and its worker stopped before it "
    "confirmed; it was sent again, which its tool declares has no further effect when "
    "repeated with the same arguments."
)
JOURNAL_REPLAY = (
    "This call already ran before the run was resumed; this is the answer it gave then. "
    "It was not run again."
)
VERIFIED_AGAIN_NOTICE = (
    "This call's outcome was unknown ({kind}), and a lookup found that it had not taken "
    "effect, so it was sent once more (the same idempotency key). This is that run's result."
)
VERIFIED_NOTICE = (
    "Verified: this call's outcome was unknown ({kind}), and a lookup found that it took "
    "effect. This is its result."
)
HUMAN_RERUN_NOTICE = (
    "A person reviewed this call after its outcome was unknown and chose to run it again "
    "(with the same idempotency key). This is the result of that run."
)
HUMAN_DONE_NOTICE = (
    "A person reviewed this call after its outcome was unknown and confirmed that it took "
    "effect. This is the result they gave."
)
HUMAN_GAVE_UP = (
    "{tool} did not confirm the result, and a person who reviewed it chose not to run it "
    "again. It may or may not have taken effect."
)
HUMAN_GAVE_UP_HINT = (
    "Do not run this call again. Tell the user that its outcome is unknown and that a "
    "person decided not to retry it."
)
HUMAN_NOTE = " Their note: {note}"
NOT_RUN = (
    "{tool} was not run for this call: the run that asked for it stopped (it was "
    "cancelled, interrupted, or its worker stopped) before the call started, so nothing "
    "was done."
)
NOT_RUN_READ = (
    "{tool} gave no answer to this call: the run that asked for it stopped (it was "
    "cancelled, interrupted, or its worker stopped) before the call was answered. It only "
    "reads, so nothing was changed."
)
NOT_RUN_HINT = "If you still need it, send the same call to {tool} again: it is safe to repeat."
LEFT_UNANSWERED = (
    "{tool} gave no answer to this call: the run that asked for it stopped (it was "
    "cancelled, interrupted, or its worker stopped) before the call was answered, and no "
    "record tells whether it started. The action may or may not have taken effect."
)
UNKNOWN_OUTCOME_HINT = (
    "Do not repeat this call blindly: first check whether it took effect (for example with a "
    "read, get or list tool). If it did not, send this same call again: it will run once "
    "more, as the same request (the same idempotency key)."
)
UNKNOWN_OUTCOME_CHECK = (
    "Do not repeat this call blindly: first check whether it took effect with {check} (the "
    '"check" below). If it did not, send this same call to {tool} again: it will run once '
    "more, as the same request (the same idempotency key)."
)

TRANSIENT = "{tool} failed because a service it depends on is unavailable right now ({kind})."
BUSY = "{tool} is still busy with {n} earlier calls that did not finish, so it was not called."
TRANSIENT_HINT = (
    "Try again in a little while; if it keeps failing, tell the user the service is unavailable."
)

NOT_SENT = (
    "{tool} could not reach its service ({kind}): the request was not carried out, so "
    "nothing was done."
)
NOT_SENT_HINT = "Send the same call to {tool} again in a little while: it is safe to repeat."
RATE_LIMITED = (
    "{tool} was refused by its service because too many requests were made (rate limit); "
    "the request was not carried out."
)
RATE_LIMITED_HINT = "Wait at least {s:g} s before calling {tool} again, or do something else first."
RATE_LIMITED_HINT_NO_WAIT = "Wait a little before calling {tool} again, or do something else first."

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
DROPPED_ARGS = (
    "The unknown argument(s) {names} were dropped: the tool takes no such argument "
    "(listed in 'dropped')."
)
INVALID_ARGS_HINT = (
    "Call it again with arguments of this form: {signature} ('?' marks an optional "
    "argument). Example: {example}"
)

# One sentence per argument problem (the ``message`` of each entry of ``fields``).
FIELD_MISSING = "Argument '{name}' is required ({expected}), but it was not given."
FIELD_UNEXPECTED = "Argument '{name}' is not a parameter of this tool; leave it out."
FIELD_UNEXPECTED_NAMES = (
    "Argument '{name}' is not a parameter of this tool. Its parameters are {valid}: send the "
    "value under the one you meant, or leave it out."
)
FIELD_UNEXPECTED_NESTED = (
    "'{name}' is not a field of that object. Its fields are {valid}: send the value under "
    "the one you meant, or leave it out."
)
FIELD_WRONG_TYPE = "Argument '{name}' expected {expected}, but received {received}."
FIELD_OUT_OF_RANGE = "Argument '{name}' must be {expected}, but received {received}."
FIELD_CROSS = "The arguments do not fit together: {detail}."
FIELD_CROSS_EMPTY = (
    "The arguments do not fit together; check how they depend on each other in the tool's "
    "description."
)
FIELD_INVALID = "Argument '{name}' is not valid ({detail}); received {received}."

REPAIRED_NOTICE = (
    "Note: some arguments were read differently ({repairs}). Next time use the tool's exact "
    "argument names and types."
)

CIRCUIT_OPEN = "{tool} is temporarily switched off after repeated failures of its service."
CIRCUIT_OPEN_HINT = (
    "Do not call {tool} for about {s:.0f} s; use another tool, or tell the user the service "
    "is unavailable."
)

STALE = (
    "{tool} is unavailable right now, so this is its last good result for the same call, "
    "from {age} ago: it may be out of date."
)
SUBSTITUTE = (
    "{tool} is unavailable right now, so this is substitute data, not a live result: "
    "treat it as a placeholder and say so if you use it."
)
CACHED = "This is the cached result of the same call made {age} ago."


def age_text(seconds: float) -> str:
    """A short human age, e.g. ``42 s``, ``5 min``, ``2 h``."""
    if seconds < 90:
        return f"{max(0, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds / 3600)} h"


DUPLICATE = (
    "This exact call to {tool} was already made ({n} time(s) before), so it was not run again{ran}."
)
DUPLICATE_LOOPING = (
    "This exact call to {tool} has now been repeated {n} times{ran}. You are going in circles."
)
DUPLICATE_IN_FLIGHT = (
    "An identical call to {tool} is still running, so this one was not run as well "
    "(that would do the same thing twice)."
)
DUPLICATE_UNKNOWN = (
    "An identical call to {tool} was made before and may or may not have taken effect, so it "
    "was not run again{ran}."
)
DEDUP_LANDED = (
    "The earlier identical call to {tool}, whose outcome was unknown when it timed out, "
    "finished after all and took effect: this is its result. It was not run again."
)
DUPLICATE_LANDED = (
    "The earlier identical call to {tool}, whose outcome was unknown when it timed out, "
    "finished after all and took effect{ran}, so this one was not run again (that would do "
    "it twice). Its result is in previous_result."
)
DUPLICATE_RAN = " (the earlier call ran {age} ago)"
"""How long ago the earlier call of a blocked repeat ran (`ran_ago`)."""


def ran_ago(seconds: float | None) -> str:
    """`DUPLICATE_RAN` for the ``{ran}`` of the ``duplicate_call`` messages, when the
    ledger knows the earlier call's age and it is a second old or more (a twin in the
    same message, or a call just made, says nothing), else ``""``."""
    return "" if seconds is None or seconds < 1 else DUPLICATE_RAN.format(age=age_text(seconds))


DEDUP_REUSED = (
    "This repeats an earlier identical call to {tool} ({n} time(s) before): the tool was not "
    "run again, this is the earlier result{age}."
)


def reused_age(seconds: float | None) -> str:
    """How old a reused result is, for `DEDUP_REUSED` (``", from 5 min ago"``), when its
    ledger knows and it is a second old or more (not, say, a fast call's twin in the
    same message): the model can tell an answer that may have changed since (a job's
    status it polls) from a recent one."""
    return "" if seconds is None or seconds < 1 else f", from {age_text(seconds)} ago"


DEDUP_WARN = "You asked {tool} exactly this before ({n} time(s)); this is a fresh result."
DEDUP_LOOPING = (
    "This exact call has now been repeated {n} times: you are going in circles. Use the result "
    "you have, change the arguments, or tell the user what you found."
)
ROLLBACK_GUIDANCE = (
    "[Tool note] Your last step was discarded. You called {tool} with {args}; {reason} Do not "
    "repeat that call as it was: try a different or broader query, another tool, or answer "
    "with what you know."
)
DUPLICATE_HINT = (
    "Use the earlier result instead of repeating the call; if you need something different, "
    "change the arguments."
)

LOW_QUALITY = "{tool} answered, but the result is not useful: {reason}."
LOW_QUALITY_HINT = "Try a different or broader query, or another tool."

STATE_UNAVAILABLE = "shared state store unavailable"
"""The ``kind`` of `TRANSIENT` when `Shared.on_error` fails a call closed."""
SESSION_BLOCKED = (
    "{tool} belongs to a session on an event loop that is busy or blocked (it was called "
    "from sync code running on that loop), so it was not called."
)
SESSION_CLOSED = "{tool} belongs to a session whose event loop is closed, so it was not called."
SESSION_HINT = (
    "Do not retry this call now; tell the user the tool is unavailable. (Developer: call "
    "the agent with ainvoke on the session's loop, or from sync code on another thread.)"
)

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


_ARTICLE_TYPES = {"integer": "an integer", "object": "an object", "array": "an array"}


def expected_text(schema: dict[str, Any]) -> str:
    """What an argument's schema asks for, as a phrase: ``an integer >= 1``, ``one of 'a', 'b'``."""
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"][:8])
    name = _type_name(schema)
    text = _ARTICLE_TYPES.get(name) or (f"a {name}" if " " not in name else name)
    if name.startswith("array of"):
        text = "an " + name
    elif name == "any":
        text = "a value"
    bounds = [
        (">=", "minimum"), (">", "exclusiveMinimum"), ("<=", "maximum"), ("<", "exclusiveMaximum"),
    ]  # fmt: skip
    limits = [
        f"{op} {schema[key]}" for op, key in bounds if isinstance(schema.get(key), (int, float))
    ]
    for key, what in (("minLength", "at least {} characters"), ("maxLength", "at most {} characters"),
                      ("minItems", "at least {} items"), ("maxItems", "at most {} items")):  # fmt: skip
        if isinstance(schema.get(key), int):
            limits.append(what.format(schema[key]))
    return f"{text} {' and '.join(limits)}" if limits else text


def _example_value(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> Any:
    if depth > 3:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _example_value(defs.get(ref.rsplit("/", 1)[-1], {}), defs, depth + 1)
    for key in ("examples", "enum"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema[key][0]
    if "default" in schema and schema["default"] is not None:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key, ()) if o.get("type") != "null"]
        if options:
            return _example_value(options[0], defs, depth + 1)
    t = schema.get("type")
    if t == "array":
        return [_example_value(schema.get("items") or {}, defs, depth + 1)]
    if t == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        req = schema.get("required") or list(props)[:1]
        return {k: _example_value(props[k], defs, depth + 1) for k in req if k in props}
    base = schema.get("minimum", 1)
    return {"integer": base, "number": base, "boolean": True, "null": None}.get(
        str(t), "<" + str(schema.get("title") or t or "value").lower() + ">"
    )


def example_call(tool: BaseTool | None) -> str:
    """A valid-looking JSON object of the required arguments (and enums) for `tool`."""
    import json

    schema = tool_args_schema(tool)
    try:
        defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
        props: dict[str, Any] = schema.get("properties", {})
        required = [k for k in schema.get("required", ()) if k in props]
        example = {k: _example_value(props[k], defs) for k in required or list(props)[:1]}
        return json.dumps(example, default=str)[:400]
    except Exception:  # an unusual schema must not break an error message
        return "{}"


def valid_call_form(tool: BaseTool | None, name: str) -> str:
    """The suggestion of an ``invalid_arguments`` envelope: the call form and an example."""
    return INVALID_ARGS_HINT.format(signature=signature(tool, name), example=example_call(tool))
