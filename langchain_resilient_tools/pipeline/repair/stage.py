"""Argument repair: the outermost stage, so that every later stage sees the repaired call.

Malformed calls (``call.parse_error``) whose text can be repaired become ordinary calls
(in a call, or, for an adapter that answers them apart, in its step: `open_step`);
names and types are repaired by `pipeline.repair.logic.repair_call` against the tool's model-visible
schema. Each repair is listed in ``call.record.repairs`` and one short notice tells the
model which names or types were read differently.
"""

from __future__ import annotations

from typing import Any

from ...core.call import Call
from ...text import messages as m
from ..schema import tool_schema
from ..stage import BeforeStage, Env
from ..step import Step
from .logic import Repaired, fits, repair_call

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

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self._carried: dict[str, Repaired] = {}
        """Repairs made to invalid calls of a step, by call id, until their call is made."""

    def open_step(self, step: Step) -> None:
        """Repair the step's invalid calls where their text can be read (`Step.repaired`);
        the call made later under such an id (in another step: the middleware runs it
        as a call of the message) reports the repairs and names what was dropped."""
        for bad in step.invalid_calls:
            name, raw, call_id = bad.get("name") or "", bad.get("args"), bad.get("id")
            tool = step.tools.get(name)
            if tool is None or raw is None or not call_id or self.env.resolve is None:
                continue
            policy = self.env.resolve(name).policy
            facts = tool_schema(tool).facts
            result = repair_call(raw, facts, policy.args.aliases, unknown_args=policy.args.unknown)
            if result.args is None:
                continue
            if len(self._carried) > 1024:
                self._carried.clear()
            self._carried[call_id] = result
            step.repaired[call_id] = result.args
        if self._carried:
            step.on_call(self._carry)

    def _carry(self, call: Call) -> None:
        carried = self._carried.pop(call.id, None)
        if carried is not None:
            call.record.repairs.extend(carried.repairs)
            call.dropped = (*call.dropped, *carried.dropped)  # named in the envelope
