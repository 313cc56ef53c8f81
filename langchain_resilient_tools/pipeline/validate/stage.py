"""Client-side validation: the (repaired) arguments must fit the tool's schema.

Runs right after admission, before anything that would remember or run the call, and
fails it with `InvalidArguments` listing every problem (see `pipeline.validate.logic`).
"""

from __future__ import annotations

from ...core.call import Call
from ...core.errors import InvalidArguments
from ..schema import tool_schema
from ..stage import BeforeStage
from .logic import check


def validate(call: Call) -> None:
    """Raise `InvalidArguments` when `call.args` do not fit the tool's schema."""
    tool = call.tool
    if tool is None or call.schemaless or call.malformed or call.tool_validates:
        return
    if tool.handle_validation_error:  # the tool answers its own validation errors
        return
    reject = call.resolved.policy.unknown_args == "reject"
    problems = check(tool_schema(tool), call.args, reject_unknown=reject)
    if problems:
        raise InvalidArguments(problems)


class ValidateStage(BeforeStage):
    name = "validate"
    before = staticmethod(validate)
