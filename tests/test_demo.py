"""The README's demo runs offline and shows what it promises."""

from __future__ import annotations

import pytest

from langchain_resilient_tools import demo, set_testing


def test_demo_runs_and_reports(capsys: pytest.CaptureFixture[str]) -> None:
    with set_testing(True):
        demo.main()
    out = capsys.readouterr().out
    assert "secret leaked to the model: False" in out
    for error in ("timeout", "unknown_outcome", "tool_error", "unknown_tool", "malformed_call"):
        assert error in out
    assert "'create_booking': 1" in out  # the write ran once
    assert "call_fixable   success" in out  # repaired and run
    assert "system prompt ends with the error guidance" in out
