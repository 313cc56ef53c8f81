"""Two users, alice and bob, and an orders service: the tools, states and graphs that
`tests/test_dedup_scope.py` and `tests/test_result_scope.py` share.

Each tool returns ``"orders of <user>"`` for the user it learns from something the model
never sees: the graph state, one state field, the run's config (declared or read with
``get_config()``), LangGraph's runtime context, a store read keyed by the config, a plain
injected argument, or the request a web application serves (`CURRENT`). `SERVICE` counts
the runs and can be taken down; `reset` gives each test a fresh one (its own thread ids,
since a database outlives a test).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolArg, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from langgraph.prebuilt import InjectedState, InjectedStore, ToolNode
from langgraph.store.base import BaseStore

from langchain_resilient_tools import (
    ResilientTool,
    ResilientToolNode,
    ResilientToolsMiddleware,
    ResilientToolsState,
    ToolPolicy,
)
from langchain_resilient_tools.testing import ScriptedChatModel
from tests.support.graphs import tools_graph

ADAPTERS = ("node", "tool", "middleware")
MODES = ("sync", "async")

SERVICE: dict[str, Any] = {"runs": 0, "down": False, "test": ""}
"""The orders service: how many times it ran, whether it is down, the test's id."""
CURRENT = {"user": ""}
"""Who asks, as a web application keeps it for the request it serves (read undeclared)."""


def reset() -> None:
    """A fresh service (up, no runs), thread ids of the test's own, no current user."""
    SERVICE.update(runs=0, down=False, test=uuid.uuid4().hex[:8])
    CURRENT["user"] = ""


def serve(user: str) -> str:
    SERVICE["runs"] += 1
    if SERVICE["down"]:
        raise ConnectionError("orders service unreachable")
    return f"orders of {user}"


@dataclass
class Ctx:
    user: str


class UserState(ResilientToolsState):
    user: str


class AgentUserState(AgentState[Any]):
    user: str


@tool
def get_orders_by_state(state: Annotated[dict[str, Any], InjectedState]) -> str:
    """The current user's orders (the user is read from the graph state)."""
    return serve(state["user"])


@tool
def get_orders_by_user_field(user: Annotated[str, InjectedState("user")]) -> str:
    """The current user's orders (the user is one field of the graph state)."""
    return serve(user)


@tool
def get_orders_by_config(config: RunnableConfig) -> str:
    """The current user's orders (the user is read from the run's config)."""
    return serve(config["configurable"]["user_id"])


@tool
def get_orders_by_context(runtime: ToolRuntime[Ctx]) -> str:
    """The current user's orders (the user is LangGraph's runtime context)."""
    return serve(runtime.context.user)


@tool
def get_orders_by_store(store: Annotated[BaseStore, InjectedStore()]) -> str:
    """The current user's orders, read from the store under the user of the run."""
    user = get_config()["configurable"]["user_id"]
    item = store.get(("users",), user)
    return serve(item.value["name"] if item else user)


@tool
def get_orders_undeclared() -> str:
    """The current user's orders (the user is read from the config, undeclared)."""
    return serve(get_config()["configurable"]["user_id"])


@tool
def get_orders_by_arg(user_id: Annotated[str, InjectedToolArg]) -> str:
    """The current user's orders (the user is an injected argument)."""
    return serve(user_id)


@tool
def get_my_orders() -> str:
    """The current user's orders (the user is the request's, as the web app keeps it)."""
    return serve(CURRENT["user"])


def build(
    adapter: str,
    the_tool: BaseTool,
    policy: ToolPolicy,
    *,
    saver: BaseCheckpointSaver[Any] | None,
    store: BaseStore | None = None,
) -> tuple[Any, ScriptedChatModel | None]:
    """One compiled graph serving `the_tool` through `adapter`, and the scripted model of
    the agent (`None` for a graph of tools alone): its state has the user, its context is
    `Ctx`."""
    if adapter == "middleware":
        model = ScriptedChatModel(script=[AIMessage("done")])
        agent = create_agent(
            model,
            tools=[the_tool],
            middleware=[ResilientToolsMiddleware(policy=policy)],
            state_schema=AgentUserState,
            context_schema=Ctx,
            checkpointer=saver,
            store=store,
        )
        return agent, model
    if adapter == "node":
        node: Any = ResilientToolNode([the_tool], policy=policy)
    else:
        node = ToolNode([ResilientTool.wrap(the_tool, policy=policy)], handle_tool_errors=True)
    graph = tools_graph(node, UserState, context_schema=Ctx, checkpointer=saver, store=store)
    return graph, None
