"""The graph most tests run their calls through: a tools node alone."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph

from langchain_resilient_tools import ResilientToolsState


def tools_graph(
    node: Any,
    state: Any = ResilientToolsState,
    *,
    context_schema: Any = None,
    node_kw: dict[str, Any] | None = None,
    **compile_kw: Any,
) -> Any:
    """START -> ``tools`` (`node`, with LangGraph's `node_kw`) -> END over `state`,
    compiled with `compile_kw` (``checkpointer``, ``store``, ``interrupt_before``...)."""
    graph = StateGraph(state, context_schema=context_schema)
    graph.add_node("tools", node, **(node_kw or {}))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile(**compile_kw)
