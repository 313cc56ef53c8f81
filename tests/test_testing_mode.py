"""`set_testing` makes backoff instant, records it, and restores itself."""

from __future__ import annotations

import asyncio
import time

from langchain_resilient_tools import set_testing
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


def test_sleeps_are_instant_and_recorded() -> None:
    with set_testing(True) as t:
        start = time.monotonic()
        sleep(10)
        asyncio.run(asleep(20))
        assert time.monotonic() - start < 1
    assert t.sleeps == [10, 20]
