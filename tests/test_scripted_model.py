"""`ScriptedChatModel(per_turn=True)`: every user turn of every conversation plays the script
from its start, as a served graph needs (one model object serves every thread)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_resilient_tools.testing import ScriptedChatModel, tool_call

TURN = AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Oslo"}, id="1")])
FINAL = AIMessage("sunny")


def test_the_default_plays_one_script_for_every_caller() -> None:
    model = ScriptedChatModel(script=[TURN, FINAL])
    assert model.invoke([HumanMessage("a")]).tool_calls
    assert model.invoke([HumanMessage("b")]).content == "sunny"  # another conversation


def test_per_turn_replays_the_script_on_each_user_turn_of_each_conversation() -> None:
    model = ScriptedChatModel(script=[TURN, FINAL], per_turn=True)
    system = SystemMessage("be brief")
    first = [system, HumanMessage("weather?")]
    assert model.invoke(first).tool_calls
    assert model.invoke([system, HumanMessage("other thread")]).tool_calls
    answered = [*first, TURN, ToolMessage("sunny in Oslo", tool_call_id="1")]
    assert model.invoke(answered).content == "sunny"
    assert model.invoke([*answered, FINAL, FINAL]).content == "sunny"  # the last one repeats
    assert model.invoke([*answered, FINAL, HumanMessage("again?")]).tool_calls  # a new turn
    assert len(model.seen) == 5
