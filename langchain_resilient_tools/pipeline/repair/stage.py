"""Argument repair: the outermost stage, so that every later stage sees the repaired call.

Malformed calls (``call.parse_error``) whose text can be repaired become ordinary calls;
names and types are repaired by `pipeline.repair.logic.repair_call` against the tool's model-visible
schema. Each repair is listed in ``call.record.repairs`` and one short notice tells the
model which names or types were read differently.
"""

from __future__ import annotations

from typing import Any

from ...core.call import Call
from ...text import messages as m
from ..schema import tool_schema
from ..stage import BeforeStage
from .logic import fits, repair_call

_MAX_LISTED = 4


def note_dropped(call: Call, names: tuple[str, ...] | list[str]) -> None:
    """Remember that repair dropped the arguments `names` from `call` (`Call.dropped`)."""
    if names:
        call.dropped = (*call.dropped, *names)


def repair(call: Call) -> None:
    """Repair `call` in place (arguments, or a malformed call's raw text)."""
    if call.tool is None or call.schemaless:
        return
    schema = tool_schema(call.tool)
    hidden = schema.hidden  # the arguments the runtime injects
    if hidden and hidden.intersection(call.args):
        call.args = _without(call.args, hidden)
    facts = schema.facts
    if call.malformed:
        if call.raw_args is None:
            return
        source: Any = call.raw_args
    elif not call.record.repairs and (not facts.known or fits(call.args, facts)):
        return  # nothing to repair, and no earlier repair (the middleware's) to report
    else:
        source = call.args
    policy = call.resolved.policy
    result = repair_call(source, facts, policy.args.aliases, unknown_args=policy.args.unknown)
    if result.args is None:
        if call.malformed and result.error:
            call.parse_error = result.error
        return
    call.args = _without(result.args, hidden) if hidden else result.args
    call.parse_error = None
    note_dropped(call, result.dropped)
    record = call.record
    record.repairs.extend(result.repairs)
    if record.repairs:
        listed = "; ".join(record.repairs[:_MAX_LISTED])
        if len(record.repairs) > _MAX_LISTED:
            listed += f"; and {len(record.repairs) - _MAX_LISTED} more"
        notice = m.REPAIRED_NOTICE.format(repairs=listed)
        record.notices.append(notice)
        call.repair_notice = notice


def _without(args: dict[str, Any], hidden: frozenset[str]) -> dict[str, Any]:
    """`args` less the values the model sent for arguments the runtime injects (state,
    store, runtime, ...): the runtime's values replace them silently, as in `ToolNode`
    (the model never saw those arguments, so there is nothing to tell it)."""
    return {k: v for k, v in args.items() if k not in hidden}


class RepairStage(BeforeStage):
    name = "repair"
    before = staticmethod(repair)
