"""`set_testing` makes backoff instant, records it, and restores itself."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from langchain_resilient_tools import set_testing
from langchain_resilient_tools.core import testing
from langchain_resilient_tools.core.testing import asleep, is_testing, sleep


def test_nested_modes_restore_the_previous_one() -> None:
    assert is_testing()  # the suite runs in testing mode (conftest)
    with set_testing(False):
        assert not is_testing()
        with set_testing(True) as inner:
            sleep(5)
            assert inner.sleeps == [5]
        assert not is_testing()
    assert is_testing()


def test_sleeps_are_instant_and_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Instant: no real wait is asked of `time` or `asyncio` (no clock needed to see it)."""
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(testing, "time", SimpleNamespace(sleep=waits.append))
    monkeypatch.setattr(testing, "asyncio", SimpleNamespace(sleep=no_wait))
    with set_testing(True) as t:
        sleep(10)
        asyncio.run(asleep(20))
    assert t.sleeps == [10, 20]
    assert all(w == 0 for w in waits), waits  # at most a yield to the loop
    with set_testing(False):  # and outside testing mode the waits are real ones
        sleep(1)
        asyncio.run(asleep(2))
    assert [w for w in waits if w] == [1, 2]
