"""max_result_chars: huge results cut visibly; JSON stays valid JSON."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_resilient_tools import ToolPolicy
from langchain_resilient_tools.testing import tool_call
from langchain_resilient_tools.text.truncate import truncate, truncate_text
from tests.conftest import Harness
from tests.tools import counted


def test_short_content_is_untouched() -> None:
    assert truncate("abc", 10) == "abc"
    assert truncate("abc", None) == "abc"
    assert truncate('{"a": 1}', 100) == '{"a": 1}'


def test_text_is_cut_with_a_marker() -> None:
    out = truncate_text("x" * 20_000, 500)
    assert len(out) <= 500
    assert out.startswith("x" * 100)
    assert out.endswith(f"... [truncated {20_000 - out.index(chr(10))} chars]")


def test_json_long_strings_are_cut_and_structure_kept() -> None:
    data = {"organic": [{"title": f"t{i}", "snippet": "s" * 5000} for i in range(3)], "n": 3}
    out = truncate_text(json.dumps(data), 2000)
    assert len(out) <= 2000
    parsed = json.loads(out)
    assert parsed["n"] == 3 and [r["title"] for r in parsed["organic"]] == ["t0", "t1", "t2"]
    assert "[truncated" in parsed["organic"][0]["snippet"]


def test_json_long_lists_are_cut_with_a_marker() -> None:
    data = {"items": list(range(10_000))}
    parsed = json.loads(truncate_text(json.dumps(data), 300))
    assert parsed["items"][0] == 0
    assert parsed["items"][-1].startswith("... [truncated ")
    assert parsed["items"][-1].endswith(" items]")


def test_json_whose_structure_is_too_big_is_wrapped() -> None:
    data = {f"key{i}": i for i in range(2000)}
    out = truncate_text(json.dumps(data), 200)
    assert len(out) <= 200
    assert "truncated_json" in json.loads(out)


def test_content_blocks_share_the_budget() -> None:
    blocks = [{"type": "text", "text": "a" * 300}, {"type": "text", "text": "b" * 300}]
    out = truncate(blocks, 400)
    assert out[0]["text"] == "a" * 300
    assert out[1]["text"].startswith("b") and "[truncated" in out[1]["text"]


@settings(max_examples=150, deadline=None)
@given(
    data=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=400),
        lambda inner: st.lists(inner, max_size=30) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=60,
    ),
    limit=st.integers(min_value=60, max_value=3000),
)
def test_json_stays_valid_and_bounded(data: Any, limit: int) -> None:
    text = json.dumps(data)
    out = truncate_text(text, limit)
    if len(text) <= limit:
        assert out == text
    elif isinstance(data, (dict, list)):
        json.loads(out)  # still valid JSON
        assert len(out) <= limit
    else:
        assert "[truncated" in out


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=5000), limit=st.integers(min_value=40, max_value=2000))
def test_text_never_exceeds_the_limit(text: str, limit: int) -> None:
    out = truncate_text(text, limit)
    assert len(out) <= limit or out == text


def test_through_every_adapter(harness: Harness) -> None:
    payload = {"organic": [{"snippet": "z" * 10_000}], "total": 1}
    tool = counted("search_web", lambda query: json.dumps(payload))
    policy = ToolPolicy(max_result_chars=1000)
    result = harness.run([tool], [tool_call("search_web", {"query": "q"}, id="c1")], policy=policy)
    content = str(result["c1"].content)
    assert len(content) <= 1000
    parsed = json.loads(content)
    assert parsed["total"] == 1 and "[truncated" in parsed["organic"][0]["snippet"]


def test_text_result_through_every_adapter(harness: Harness) -> None:
    tool = counted("get_page", lambda query: "word " * 5000)
    policy = ToolPolicy(max_result_chars=500)
    result = harness.run([tool], [tool_call("get_page", {"query": "q"}, id="c1")], policy=policy)
    content = str(result["c1"].content)
    assert len(content) <= 500 and content.endswith("chars]")
