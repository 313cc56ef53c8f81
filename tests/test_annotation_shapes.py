"""One reader of tool annotations (`core.annotations.hints_of`) for every shape in use.

Plain LangChain tools whose ``metadata`` carries the hints as each loader puts them (no
server, no `mcp` needed): langchain-mcp-adapters' top-level keys, `langchain.mcp`'s nested
``metadata["mcp"]["tool"]["annotations"]`` (snake_case, camelCase, or an object), and bare
keys a person wrote; then what wins when shapes disagree; then through every adapter.
The same through real servers: `tests/test_mcp_annotations.py` (langchain-mcp-adapters,
`mcp` 1.x) and `tests/test_mcp_langchain.py` (`langchain.mcp`, `mcp` 2.x).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool

from langchain_resilient_tools import ToolPolicy
from langchain_resilient_tools.core.annotations import ToolHints, hints_of
from langchain_resilient_tools.core.policy import PolicyResolver
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.support.answers import by_id
from tests.tools import CALLS, counted, flaky_tool

CAMEL = {"read_only": "readOnlyHint", "destructive": "destructiveHint",
         "idempotent": "idempotentHint", "open_world": "openWorldHint"}  # fmt: skip
SERVER = {"name": "shop", "version": "1.0"}


@dataclass(frozen=True)
class Annotations:
    """An annotations object with snake_case attributes (as `mcp` 2.x's ToolAnnotations)."""

    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


Shape = Callable[[dict[str, bool]], dict[str, Any]]
"""The metadata a loader makes of hints given as ``{"read_only": True, ...}``."""

SHAPES: dict[str, Shape] = {
    # langchain-mcp-adapters (mcp 1.x): every key there, None for those not given
    "adapters": lambda h: {"title": None, **{CAMEL[k]: h.get(k) for k in CAMEL}},
    # the same dump under mcp 2.x (snake_case field names)
    "adapters-snake": lambda h: {f"{k}_hint": v for k, v in h.items()},
    # langchain.mcp: nested, snake_case, None left out (model_dump(exclude_none=True))
    "langchain.mcp": lambda h: {"mcp": {"tool": {"annotations": {f"{k}_hint": v for k, v in
                                h.items()}, "_meta": {}}, "server": SERVER}},
    "langchain.mcp-camel": lambda h: {"mcp": {"tool": {"annotations": {CAMEL[k]: v for k, v in
                                      h.items()}}}},
    "langchain.mcp-object": lambda h: {"mcp": {"tool": {"annotations": Annotations(
        **{f"{k}_hint": v for k, v in h.items()})}}},
    # metadata a person wrote
    "bare": lambda h: dict(h),
}  # fmt: skip
SOURCES = {
    "adapters": 'metadata["readOnlyHint"], ...',
    "adapters-snake": 'metadata["read_only_hint"], ...',
    "langchain.mcp": 'metadata["mcp"]["tool"]["annotations"]["read_only_hint"], ...',
    "langchain.mcp-camel": 'metadata["mcp"]["tool"]["annotations"]["readOnlyHint"], ...',
    "langchain.mcp-object": 'metadata["mcp"]["tool"]["annotations"]["read_only_hint"], ...',
    "bare": 'metadata["read_only"], ...',
}


def tool_with(name: str, metadata: Any) -> BaseTool:
    tool = counted(name, lambda key="": key)
    tool.metadata = metadata
    return tool


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "hints",
    [
        {"read_only": True, "open_world": False},
        {"read_only": False, "destructive": True},
        {"destructive": False, "idempotent": True},
        {"idempotent": False},
    ],
)
def test_every_shape_reads_the_same(shape: str, hints: dict[str, bool]) -> None:
    read = hints_of(tool_with("t", SHAPES[shape](hints)))
    assert read == ToolHints(**hints)
    assert read is not None and read.source == SOURCES[shape]
    assert read.set_aside == ()


@pytest.mark.parametrize("shape", SHAPES)
def test_a_shape_that_says_nothing_about_reads_and_writes(shape: str) -> None:
    assert hints_of(tool_with("t", SHAPES[shape]({}))) is None
    assert hints_of(tool_with("t", SHAPES[shape]({"open_world": True}))) is None


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        {},
        {"title": "Weather"},
        {"readOnlyHint": "yes", "read_only": 1, "read_only_hint": None},  # not bools
        {"mcp": {"tool": {"annotations": {"read_only_hint": "true"}}}},
        {"mcp": "shop", "tool": {"annotations": {"read_only_hint": True}}},
        {"mcp": {"server": SERVER}},  # a server, no annotations
        {"mcp": {"tool": {"annotations": None}}},
        {"annotations": {"readOnlyHint": True}},  # no loader puts them there: not read
        "readOnlyHint",  # metadata that is not a mapping
    ],
)
def test_what_is_not_a_hint(metadata: Any) -> None:
    assert hints_of(tool_with("t", metadata)) is None


def test_an_object_whose_attributes_cannot_be_read_says_nothing() -> None:
    class Broken:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(name)

    assert hints_of(tool_with("t", {"mcp": {"tool": {"annotations": Broken()}}})) is None


def test_mcp_types_tool_annotations_as_an_object() -> None:
    """The installed `mcp`'s own model (camelCase fields in 1.x, snake_case in 2.x)."""
    types = pytest.importorskip("mcp.types")
    model = types.ToolAnnotations.model_validate({"readOnlyHint": True})
    read = hints_of(tool_with("t", {"mcp": {"tool": {"annotations": model}}}))
    assert read == ToolHints(read_only=True)


# -- several shapes on one tool ----------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected", "source", "set_aside"),
    [
        # disagreeing: the most careful reading, whatever the order
        ({**SHAPES["langchain.mcp"]({"destructive": True}), "readOnlyHint": True},
         ToolHints(destructive=True), "langchain.mcp", ("adapters",)),
        ({**SHAPES["langchain.mcp"]({"read_only": True}), "readOnlyHint": False},
         ToolHints(read_only=False), "adapters", ("langchain.mcp",)),
        ({"read_only": True, "idempotentHint": True},  # an idempotent write over a read
         ToolHints(idempotent=True), "adapters", ("bare",)),
        ({"mcp": {"tool": {"annotations": {"read_only_hint": True, "readOnlyHint": False}}}},
         ToolHints(read_only=False), "langchain.mcp-camel", ("langchain.mcp",)),
        # as careful as each other: the first in precedence order, nothing set aside
        ({**SHAPES["langchain.mcp"]({"read_only": False}), "destructiveHint": True},
         ToolHints(read_only=False), "langchain.mcp", ()),
        ({"read_only": True, "read_only_hint": True, "readOnlyHint": True},
         ToolHints(read_only=True), "adapters", ()),
        # a shape that says nothing takes no part
        ({**SHAPES["adapters"]({}), "read_only": True},
         ToolHints(read_only=True), "bare", ()),
    ],
)  # fmt: skip
def test_shapes_that_disagree(
    metadata: dict[str, Any], expected: ToolHints, source: str, set_aside: tuple[str, ...]
) -> None:
    read = hints_of(tool_with("t", metadata))
    assert read == expected
    assert read is not None and read.source == SOURCES[source]
    assert read.set_aside == tuple(SOURCES[s] for s in set_aside)


def test_a_disagreement_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    tool = tool_with(
        "sync_report", {**SHAPES["langchain.mcp"]({"read_only": True}), "read_only": False}
    )
    resolver = PolicyResolver(ToolPolicy(annotations="trust"))
    with caplog.at_level(logging.INFO, logger="langchain_resilient_tools.core.policy"):
        assert resolver.resolve("sync_report", tool).access == "write"
        resolver.resolve("sync_report", tool)
    [said] = [r for r in caplog.records]
    assert said.levelno == logging.WARNING
    text = said.getMessage()
    assert "'sync_report'" in text and 'metadata["read_only"]' in text
    assert "set aside: " + SOURCES["langchain.mcp"] in text


# -- every adapter -----------------------------------------------------------------------


def test_every_shape_decides_in_every_adapter(harness: Harness) -> None:
    """Each shape on a destructive tool named like a read and on a read-only tool whose
    name says neither, each failing once in a way that may have taken effect: by default
    the invoice is never sent twice; trusted, the report is sent again and answers."""
    tools = []
    for shape, make in SHAPES.items():
        for name, hints in (
            ("get_or_create_invoice", {"read_only": False, "destructive": True}),
            ("sync_report", {"read_only": True}),
        ):
            tool = flaky_tool(f"{name}_{shape}", 1, TimeoutError)
            tool.metadata = make(hints)
            tools.append(tool)
    ai = AIMessage("", tool_calls=[tool_call(t.name, {"query": "q"}, id=t.name) for t in tools])
    graph = harness.build(tools, ai=ai, patterns={"sync_report_*": ToolPolicy(annotations="trust")})
    payload = {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}
    state = harness.invoke(graph, payload)
    answers = by_id(state["messages"])
    for shape in SHAPES:
        invoice = answers[f"get_or_create_invoice_{shape}"]
        assert json.loads(str(invoice.content))["error"] == "unknown_outcome", shape
        assert CALLS[f"get_or_create_invoice_{shape}"] == 1, shape
        report = answers[f"sync_report_{shape}"]
        assert (report.status, report.content) == ("success", "result for q"), shape
        assert CALLS[f"sync_report_{shape}"] == 2, shape
    rows = harness.stats()
    assert {(r["classified_as"], r["classified_by"]) for r in rows.values()} == {
        ("write", "annotations"),
        ("read", "annotations"),
    }
