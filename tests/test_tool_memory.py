"""Tools built per request are freed with the request (DESIGN invariant 18).

No cache of the layer keeps a tool alive: a tool that closes over a large object (a
database handle, a client, a megabyte of data) and is built, wrapped and called once per
request leaves nothing behind when the request is over.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool
from langgraph.graph import MessagesState
from pydantic import BaseModel

from langchain_resilient_tools import ResilientTool, ResilientToolNode
from langchain_resilient_tools.testing import tool_call
from tests.support.graphs import tools_graph

MB = 1 << 20


class Payload:
    """What a per-request tool closes over (weakly referenceable, unlike bytes)."""

    def __init__(self) -> None:
        self.data = bytearray(MB)


class LookupArgs(BaseModel):
    key: str


class LookupRecord(BaseTool):
    """A tool holding its own payload, as a tool built per request holds its client."""

    name: str = "lookup_record"
    description: str = "Read a record."
    args_schema: type[BaseModel] = LookupArgs
    payload: Any = None

    def _run(self, key: str) -> str:
        return f"{key}: {len(self.payload.data)} bytes"


def _tool(payload: Payload, i: int) -> BaseTool:
    return LookupRecord(name=f"lookup_record_{i % 7}", payload=payload)


def _alive(refs: list[weakref.ref[Any]]) -> int:
    gc.collect()
    return sum(ref() is not None for ref in refs)


@pytest.mark.slow
def test_ten_thousand_wrapped_tools_of_a_megabyte_each_leave_memory_flat() -> None:
    refs: list[weakref.ref[Payload]] = []
    for i in range(10_000):
        payload = Payload()
        refs.append(weakref.ref(payload))
        wrapped = ResilientTool.wrap(_tool(payload, i))
        assert wrapped.invoke({"key": "k"}) == f"k: {MB} bytes"
        del payload, wrapped
        if i % 1000 == 999:  # fail early, before a leak takes gigabytes
            assert _alive(refs) <= 2, f"{_alive(refs)} tools of 1 MB still alive after {i + 1}"
    assert _alive(refs) == 0


def test_a_graph_built_per_request_is_freed_with_its_tools() -> None:
    refs: list[weakref.ref[Payload]] = []
    for i in range(300):
        payload = Payload()
        refs.append(weakref.ref(payload))
        app = tools_graph(ResilientToolNode([_tool(payload, i)]), MessagesState)
        name = f"lookup_record_{i % 7}"
        ai = AIMessage("", tool_calls=[tool_call(name, {"key": "k"}, id=f"c{i}")])
        out = app.invoke({"messages": [ai]})
        assert out["messages"][-1].content == f"k: {MB} bytes"
        del payload, app, out
    assert _alive(refs) == 0
