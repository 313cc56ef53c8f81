"""The four arms: how the agent's tool calls are run (same agent, same fault schedule).

- ``toolnode``: LangGraph's `ToolNode(tools)` with its default error handling (a tool's
  exception other than a validation error is raised and ends the episode), in a
  `StateGraph` loop agent -> tools -> agent. No per-call timeout (it has none).
- ``langchain``: `langchain.agents.create_agent(model, tools, middleware=[
  ToolRetryMiddleware(max_retries=2, initial_delay=0.01, jitter=False)])`: LangChain's
  own retry, with its defaults otherwise (every exception retried, reads and writes alike;
  ``on_failure="continue"`` answers the model with an error text once retries are spent).
  No per-call timeout (LangChain has none); `ToolCallLimitMiddleware` only blocks calls,
  it would not help a task finish, so it is left out.
- ``langchain_split``: what a LangChain user who knows which tools write can build from
  LangChain's own middleware: `ToolErrorMiddleware` (every tool exception answered to the
  model as ``"<ExceptionType>: <message>"``) around two `ToolRetryMiddleware`s, one for
  the reads (every exception retried, twice) and one for the writes that retries only
  what says the request never left (``ConnectionRefusedError``, a 429/503 refusal).
- ``ours``: `ResilientToolNode(tools, policy=ToolPolicy(timeout=0.2))` in the same loop
  as ``toolnode`` (tools whose names do not say whether they read or write get
  ``idempotent=`` set; see `Domain.odd_names`).
- ``ours_docs``: as the docs recommend for such tools: reads
  ``ToolPolicy.flaky_read(timeout=0.2)``; writes
  ``ToolPolicy.critical_write(verify=..., timeout=0.2)`` whose lookup is the domain's
  check read for that write (what `careful` reads), compared with the state the task
  expects at that point (found: the check's answer; not found: `None`).

Every graph is compiled with an `InMemorySaver` checkpointer and run on a thread of its
own. The loop sends an `AIMessage` with tool calls *or* invalid tool calls to the tools
node (so a malformed call reaches a node that can answer it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

from langchain_resilient_tools import ResilientToolNode, ResilientToolsState, ToolPolicy

from .agents import TaskAgent, effect_present
from .core import Action, Domain, Env, Task

ARMS = ("toolnode", "langchain", "langchain_split", "ours", "ours_docs")
TIMEOUT_S = 0.2
"""Per-call timeout of the arms that have one."""


def _loop(model: Any, node: Any) -> Any:
    def agent(state: ResilientToolsState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: ResilientToolsState) -> str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
            return "tools"
        return END

    g = StateGraph(ResilientToolsState)
    g.add_node("agent", agent)
    g.add_node("tools", node)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver())


def _odd(domain: Domain) -> dict[str, ToolPolicy]:
    return {name: ToolPolicy(idempotent=flag) for name, flag in domain.odd_names.items()}


def docs_policies(domain: Domain, task: Task, agent: TaskAgent, env: Env) -> dict[str, ToolPolicy]:
    """Per-tool policies as the docs recommend (reads: flaky_read; writes: critical_write
    with the domain's check as the lookup)."""

    def verify_for(name: str) -> Callable[[Any], Any]:
        def verify(info: Any) -> Any:
            check = domain.check_for(Action(name, dict(info.args)))
            if check is None:
                raise LookupError(f"no lookup for {name}")
            seen = domain.call(env, check.name, check.args)
            return seen if effect_present(domain, task, agent.index, check, seen) else None

        return verify

    policies: dict[str, ToolPolicy] = {}
    for name in sorted(domain.names):
        if name in domain.writes:
            kwargs: dict[str, Any] = {"timeout": TIMEOUT_S}
            if name in domain.odd_names:
                kwargs["idempotent"] = domain.odd_names[name]
            if name in domain.checks:
                policies[name] = ToolPolicy.critical_write(verify=verify_for(name), **kwargs)
            else:  # nothing to look it up with: the model is told (no person in this loop)
                policies[name] = ToolPolicy.critical_write(unknown_outcome="answer", **kwargs)
        else:
            policies[name] = ToolPolicy.flaky_read(timeout=TIMEOUT_S)
    return policies


def never_sent(exc: BaseException) -> bool:
    """Whether `exc` says the request never reached the service (safe to send a write again)."""
    return isinstance(exc, ConnectionRefusedError) or getattr(exc, "status_code", None) in (
        429,
        503,
    )


def _split_middleware(domain: Domain) -> list[Any]:
    from langchain.agents.middleware import ToolErrorMiddleware, ToolRetryMiddleware

    class WriteRetryMiddleware(ToolRetryMiddleware):  # type: ignore[misc]
        """A second `ToolRetryMiddleware` (create_agent wants distinct names)."""

    def answer(exc: Exception, request: Any) -> str:
        return f"{type(exc).__name__}: {exc}"

    common: dict[str, Any] = {"max_retries": 2, "initial_delay": 0.01, "jitter": False}
    reads = sorted(domain.names - domain.writes)
    return [
        ToolErrorMiddleware(on_error=answer),
        ToolRetryMiddleware(tools=reads, on_failure="error", **common),
        WriteRetryMiddleware(
            tools=sorted(domain.writes), retry_on=never_sent, on_failure="error", **common
        ),
    ]


def build(
    arm: str,
    model: Any,
    tools: Sequence[BaseTool],
    *,
    domain: Domain,
    task: Task,
    agent: TaskAgent,
    env: Env,
) -> Any:
    """The compiled graph of `arm` around `model` and `tools`."""
    if arm == "toolnode":
        return _loop(model, ToolNode(list(tools)))
    if arm == "langchain":
        from langchain.agents import create_agent
        from langchain.agents.middleware import ToolRetryMiddleware

        retry = ToolRetryMiddleware(max_retries=2, initial_delay=0.01, jitter=False)
        return create_agent(model, list(tools), middleware=[retry], checkpointer=InMemorySaver())
    if arm == "langchain_split":
        from langchain.agents import create_agent

        return create_agent(
            model, list(tools), middleware=_split_middleware(domain), checkpointer=InMemorySaver()
        )
    if arm == "ours":
        node = ResilientToolNode(
            list(tools), policy=ToolPolicy(timeout=TIMEOUT_S), policies=_odd(domain)
        )
        return _loop(model, node)
    if arm == "ours_docs":
        node = ResilientToolNode(list(tools), policies=docs_policies(domain, task, agent, env))
        return _loop(model, node)
    raise ValueError(f"unknown arm {arm!r} (one of {', '.join(ARMS)})")
