"""A travel assistant: a model node and a `ResilientToolNode`, served by `langgraph dev`.

The model is scripted so that the example runs offline; any chat model works in its
place (``init_chat_model("openai:gpt-4.1").bind_tools(TOOLS)``). The first word of the
user's message picks its script: ``trip`` asks for six tool calls in one turn against
misbehaving services, ``order`` places an order whose reply is lost (a person decides
what happens next: the run stops with an interrupt, resumed over the API), ``book``
books a hotel and, in the same step, asks the traveller a question (the run stops with
the question; on resume the step runs again, and the booking it already made is
answered from the write journal in the server's store instead of being made twice).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import interrupt
from travel_services import (
    book_hotel,
    create_order,
    get_customer,
    get_report,
    search_flights,
)

from langchain_resilient_tools import (
    ResilientToolNode,
    ResilientToolsState,
    RetryPolicy,
    ToolPolicy,
)
from langchain_resilient_tools.prompts import with_tool_error_guidance
from langchain_resilient_tools.testing import ScriptedChatModel, invalid_call, tool_call


@tool
def ask_traveller(question: str) -> str:
    """Ask the traveller a question (the run stops until it is resumed with the answer)."""
    return str(interrupt({"question": question}))


TOOLS = [search_flights, get_report, get_customer, create_order, book_hotel, ask_traveller]

TRIP = AIMessage(
    "",
    tool_calls=[
        tool_call("search_flights", {"destination": "Lisbon"}, id="call_search"),
        tool_call("get_report", {"topic": "fares"}, id="call_report"),
        tool_call("get_customer", {"customer_id": "c-42"}, id="call_customer"),
        tool_call("lookup_usr", {"name": "ada"}, id="call_typo"),
    ],
    invalid_tool_calls=[
        invalid_call("search_flights", "{'Destination': 'Porto',}", id="call_fixable"),
        invalid_call("search_flights", '{"destination": "Lis', id="call_cut"),
    ],
)
ORDER = AIMessage("", tool_calls=[tool_call("create_order", {"item": "tea"}, id="call_order")])
BOOK = AIMessage(
    "",
    tool_calls=[
        tool_call("book_hotel", {"hotel": "Casa Lisboa"}, id="call_book"),
        tool_call("ask_traveller", {"question": "Window or aisle?"}, id="call_ask"),
    ],
)

MODELS = {
    "trip": ScriptedChatModel(script=[TRIP, AIMessage("Here is your trip.")], per_turn=True),
    "order": ScriptedChatModel(script=[ORDER, AIMessage("Your order is in.")], per_turn=True),
    "book": ScriptedChatModel(script=[BOOK, AIMessage("Your room is booked.")], per_turn=True),
}
SYSTEM = SystemMessage(with_tool_error_guidance("You are a travel assistant."))

tools = ResilientToolNode(
    TOOLS,
    policy=ToolPolicy(timeout=0.3, retry=RetryPolicy(max_attempts=3, initial_delay=0.05)),
    policies={
        # It answers at once (its first reply is lost after the order landed): a timeout
        # that a busy machine cannot reach before its first attempt even starts.
        "create_order": ToolPolicy(timeout=10.0, unknown_outcome="interrupt"),
        "ask_traveller": ToolPolicy(idempotent=False),  # a question: asked once, never retried
    },
)


def agent(state: ResilientToolsState) -> dict[str, Any]:
    asked = next(m for m in reversed(state["messages"]) if isinstance(m, HumanMessage))
    topic = str(asked.content).split(maxsplit=1)[0].lower() if asked.content else ""
    model = MODELS.get(topic, MODELS["trip"])
    return {"messages": [model.invoke([SYSTEM, *state["messages"]])]}


builder = StateGraph(ResilientToolsState)
builder.add_node("agent", agent)
builder.add_node("tools", tools)
builder.add_edge(START, "agent")
builder.add_conditional_edges("agent", tools_condition)
builder.add_edge("tools", "agent")
builder.add_edge("agent", END)
graph = builder.compile()  # the server adds its own checkpointer and store
