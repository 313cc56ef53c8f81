"""Dangling tool calls, as LangGraph state: the answers a stopped run left owed, written.

A run that stops between a model message and its calls' answers leaves calls that no
``ToolMessage`` answers, and the next model call is refused (providers require every
call of a message to be answered right after it). The pipeline answers them from the
write journal and runs nothing (`Pipeline.answer_dangling`, `pipeline.journal.dangling`
says what each answer is); this module puts them in the graph state.

`repair_update` puts the answers right after their message (the whole list again, after
`REMOVE_ALL_MESSAGES`, as LangChain's summarization does: ``add_messages`` only appends).
`ResilientToolsMiddleware` applies it in ``before_model`` (a ``before_agent`` hook would
add a node, and a checkpoint, to every run); `dangling_calls_node` is a graph node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import BaseMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ..core.errors import UsageError
from ..core.tools import graph_store
from ..pipeline import Pipeline
from ..state.graph import ERRORS_KEY, LEDGER_KEY
from ..text.envelope import take_error_record


def repair_update(
    pipeline: Pipeline, tools: Mapping[str, BaseTool], state: Any, config: Any, store: Any,
    *, tools_node: str = "tools", messages_key: str = "messages",
    errors_key: str | None = ERRORS_KEY,
) -> dict[str, Any] | None:  # fmt: skip
    """The state update that answers every dangling call of `state`, each answer right
    after its message's (`None`: nothing dangles)."""
    messages = state.get(messages_key) if isinstance(state, Mapping) else state
    if not messages:
        return None
    answered, thread = pipeline.repair_dangling(
        messages, tools, state, config=config, store=store, tools_node=tools_node,
        messages_key=messages_key,
    )  # fmt: skip
    if not answered:
        return None
    after: dict[int, list[ToolMessage]] = {}
    for index, answers in answered:
        end = index  # after the answers the message already has
        while end + 1 < len(messages) and isinstance(messages[end + 1], ToolMessage):
            end += 1
        after.setdefault(end, []).extend(answers)
    repaired: list[BaseMessage] = [RemoveMessage(id=REMOVE_ALL_MESSAGES)]
    for i, message in enumerate(messages):
        repaired.append(message)
        repaired.extend(after.get(i, ()))
    update: dict[str, Any] = {messages_key: repaired}
    records = [r for a in after.values() for m in a if (r := take_error_record(m)) is not None]
    if records and errors_key and isinstance(state, Mapping) and errors_key in state:
        update[errors_key] = records
    if thread and isinstance(state, Mapping) and LEDGER_KEY in state:
        update[LEDGER_KEY] = thread
    return update


def repair_option(value: Any) -> bool:
    """`ResilientToolsMiddleware`'s ``repair_dangling``, checked."""
    if not isinstance(value, bool):
        raise UsageError(f"repair_dangling must be True or False, not {value!r}")
    return value


def repair_dangling(self: Any, state: Any) -> dict[str, Any] | None:
    """For `ResilientToolsMiddleware.before_model`: the update answering the dangling
    calls of the agent's state (`repair_update`), unless ``repair_dangling=False``."""
    if not self.repair_dangling or not Pipeline.dangles(state["messages"]):
        return None
    from langgraph.config import get_config

    config = get_config()
    tools = self._agent_tools  # the tools it saw in a model request (none yet: by name)
    return repair_update(self.pipeline, tools, state, config, graph_store(config))


async def arepair_dangling(self: Any, state: Any, runtime: Any) -> dict[str, Any] | None:
    """`ResilientToolsMiddleware.abefore_model`: its ``before_model``, on a worker thread
    when calls dangle (the journal and the checkpoints are read off the event loop)."""
    hook = self.before_model
    if self.repair_dangling and Pipeline.dangles(state["messages"]):
        return cast("dict[str, Any] | None", await asyncio.to_thread(hook, state, runtime))
    return cast("dict[str, Any] | None", hook(state, runtime))


def _of(adapter: Any) -> tuple[Pipeline, Mapping[str, BaseTool], str]:
    """The pipeline, known tools and tools node name of a node or middleware."""
    pipeline = getattr(adapter, "pipeline", None)
    if not isinstance(pipeline, Pipeline):
        raise TypeError(
            "tools must be a ResilientToolNode or a ResilientToolsMiddleware, "
            f"not {type(adapter).__name__}"
        )
    tools = getattr(adapter, "tools_by_name", None)
    if tools is not None:  # a node: its tools, and its name in the graph by default
        return pipeline, tools, str(getattr(adapter, "name", None) or "tools")
    return pipeline, getattr(adapter, "_agent_tools", {}), "tools"  # create_agent's node


def _current() -> tuple[Any, Any]:
    """The config and store of the graph run this is called in, if any."""
    from langgraph.config import get_config

    try:
        config = get_config()
    except RuntimeError:  # not inside a graph run
        return None, None
    return config, graph_store(config)


def answer_dangling_calls(
    messages: Sequence[Any] | Mapping[str, Any],
    *,
    tools: Any,
    config: RunnableConfig | None = None,
    store: Any = None,
    tools_node: str | None = None,
) -> list[ToolMessage]:
    """The `ToolMessage`s that answer every call of `messages` (or of a state's
    ``messages``) that no later message answers, from the write journal; nothing runs.

    Args:
        messages: A thread's messages, or its graph state.
        tools: The `ResilientToolNode` or `ResilientToolsMiddleware` that runs the
            thread's tools: its policies say which calls are writes; its journal is read.
        config: The config of a run of the thread (inside a graph node: the current
            one, by default): its checkpointer tells where the calls may have run.
        store: The graph's store (inside a graph node: the current one, by default).
        tools_node: The tools node's name in the graph (default: the node's ``name``;
            ``"tools"`` for the middleware, as `create_agent` names it).
    """
    pipeline, known, default_node = _of(tools)
    if config is None:
        config, found = _current()
        store = found if store is None else store
    history = messages.get("messages") or [] if isinstance(messages, Mapping) else messages
    node = tools_node or default_node
    answered = pipeline.answer_dangling(history, known, config=config, store=store, tools_node=node)
    return [answer for _index, answers in answered for answer in answers]


def dangling_calls_node(
    tools: Any,
    *,
    tools_node: str | None = None,
    messages_key: str = "messages",
    errors_key: str | None = ERRORS_KEY,
) -> Callable[[Any, RunnableConfig], dict[str, Any] | None]:
    """A graph node that answers the dangling calls of its state's messages (see
    `answer_dangling_calls`), each answer right after its message. Add it where a run
    starts, before the model node (``START -> repair -> model``).

    Args:
        tools: The `ResilientToolNode` that runs the graph's tools.
        tools_node: Its node name in the graph (default: its ``name``).
        messages_key: The state's messages (with the ``add_messages`` reducer).
        errors_key: Where error records go, when the state has that key.
    """
    pipeline, known, default_node = _of(tools)

    def repair_dangling_calls(state: Any, config: RunnableConfig) -> dict[str, Any] | None:
        return repair_update(
            pipeline, known, state, config, graph_store(config),
            tools_node=tools_node or default_node, messages_key=messages_key,
            errors_key=errors_key,
        )  # fmt: skip

    return repair_dangling_calls
