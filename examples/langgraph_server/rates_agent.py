"""An agent made with `create_agent` and `ResilientToolsMiddleware`, served by `langgraph dev`.

Its rates service is down. The breaker of `get_exchange_rate` lives in the server's
store (``shared=Shared(backend="store")``), so every run on every thread, and the server after a
restart, sees the one circuit: once it is open, no run calls the service until
`recovery_time` has passed. The model is scripted so that the example runs offline.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from travel_services import get_exchange_rate, get_weather

from langchain_resilient_tools import (
    BreakerPolicy,
    ResilientToolsMiddleware,
    RetryPolicy,
    Shared,
    ToolPolicy,
)
from langchain_resilient_tools.prompts import with_tool_error_guidance
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call

TURN = AIMessage(
    "",
    tool_calls=[
        tool_call("get_exchange_rate", {"currency": "NOK"}, id="call_rate"),
        tool_call("get_weather", {"city": "Oslo"}, id="call_weather"),
    ],
)
model = ScriptedChatModel(script=[TURN, AIMessage("Here is what I found.")], per_turn=True)

agent = create_agent(
    model,  # any chat model works here, e.g. init_chat_model("openai:gpt-4.1")
    tools=[get_exchange_rate, get_weather],
    system_prompt=with_tool_error_guidance("You are a travel assistant."),
    middleware=[
        ResilientToolsMiddleware(
            policy=ToolPolicy(timeout=2, retry=RetryPolicy(max_attempts=2, initial_delay=0.01)),
            policies={
                "get_exchange_rate": ToolPolicy(
                    breaker=BreakerPolicy(failure_threshold=3, recovery_time=600),
                    shared=Shared(backend="store"),  # the server's store: shared by every run
                )
            },
        )
    ],
)
