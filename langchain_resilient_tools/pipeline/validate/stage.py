"""Client-side validation: the (repaired) arguments must fit the tool's schema.

Runs right after admission, before anything that would remember or run the call, and
fails it with `InvalidArguments` listing every problem (see `pipeline.validate.logic`).

Where the tool validates its own arguments (a tool with ``handle_validation_error``, a
node whose ``handle_tool_errors`` the author set), only arguments its schema does not
know are checked here (``unknown_args="reject"``): a pydantic schema would silently
ignore them, and an argument the model sent is never discarded from a call that runs.
"""

from __future__ import annotations

from ...core.call import Call
from ...core.errors import InvalidArguments
from ..schema import tool_schema
from ..stage import BeforeStage
from .logic import check, unexpected


def validate(call: Call) -> None:
    """Raise `InvalidArguments` when `call.args` do not fit the tool's schema."""
    tool = call.tool
    if tool is None or call.schemaless or call.malformed:
        return
    reject = call.resolved.unknown_args == "reject"
    if call.tool_validates or tool.handle_validation_error:  # the tool answers the rest
        problems = unexpected(tool_schema(tool), call.args) if reject else []
    else:
        problems = check(tool_schema(tool), call.args, reject_unknown=reject)
    if problems:
        raise InvalidArguments(problems)


class ValidateStage(BeforeStage):
    name = "validate"
    before = staticmethod(validate)
