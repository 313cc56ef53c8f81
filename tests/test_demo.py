"""The README's demo runs offline and shows, side by side, what it promises."""

from __future__ import annotations

import re

import pytest

from langchain_resilient_tools import demo, set_testing


def _block(out: str, call_id: str) -> str:
    """The demo's rows for one call (up to the next call or section)."""
    match = re.search(rf"^{call_id}: .*?(?=^\S|\Z)", out, flags=re.S | re.M)
    assert match, call_id
    return " ".join(match.group(0).split())


def test_demo_runs_and_shows_both_nodes_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    with set_testing(True):
        demo.main(hang_limit=1.0)
    out = capsys.readouterr().out
    assert demo.SECRET not in out  # the demo masks the leak it shows
    assert "secret leaked to the model: False" in out
    assert "'create_booking': 1" in out  # the write ran once
    assert "system prompt ends with the error guidance" in out
    whole = " ".join(out.split("The whole turn")[1].split("Call by call")[0].split())
    assert "ToolNode HANG no answer after 1 s" in whole
    assert "Resilient success every call answered" in whole

    calls = [str(c["id"]) for c in [*demo.TURN.tool_calls, *demo.TURN.invalid_tool_calls]]
    rows = {call_id: _block(out, call_id) for call_id in calls}
    for call_id, text in rows.items():  # every call has both rows
        assert "ToolNode " in text and "Resilient " in text, call_id
    assert "ToolNode CRASH ConnectionError escapes the graph" in rows["call_search"]
    assert "Resilient success [2 attempt(s)" in rows["call_search"]
    for call_id in ("call_report", "call_book"):
        assert "ToolNode HANG no answer after 1 s; the demo stopped waiting" in rows[call_id]
    assert "Resilient error [3 attempt(s)" in rows["call_report"]
    assert "timeout: get_report did not answer within 0.5 s." in rows["call_report"]
    assert "unknown_outcome: create_booking" in rows["call_book"]
    customer = rows["call_customer"]
    assert "ToolNode CRASH ValueError escapes the graph" in customer
    assert "password=h*****2') Please fix your mistakes. [LEAKED" in customer
    assert "tool_error: get_customer reported an error" in customer and "password=***" in customer
    typo = rows["call_typo"]
    assert "Error: lookup_usr is not a valid tool, try one of [search_flights," in typo
    assert "unknown_tool: There is no tool named 'lookup_usr'." in typo
    assert "Did you mean 'lookup_user'? Call one of the available tools" in typo
    for call_id in ("call_fixable", "call_cut"):
        assert "ToolNode NO ANSWER invalid_tool_calls are never answered" in rows[call_id]
    assert "Resilient success" in rows["call_fixable"]
    assert "renamed 'Destination' to 'destination'" in rows["call_fixable"]
    assert "malformed_call: The arguments of this call" in rows["call_cut"]
    assert "…" not in "".join(rows.values())  # nothing the reader needs is cut
