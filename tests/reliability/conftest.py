"""Reliability suite: prints the scenario/call/fault/violation counts at the end of the run."""

from __future__ import annotations

from typing import Any

from tests.reliability.invariants import STATS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if STATS.scenarios:
        terminalreporter.write_line(STATS.line())
