"""The lease keeper: renewals while a write runs, none after it, and no wake-up per write.

Real time (the keeper's thread sleeps on the monotonic clock); every wait is bounded
generously and ends as soon as what it waits for happened.
"""

from __future__ import annotations

import threading
import time

import pytest

from langchain_resilient_tools.runtime.lease import LeaseKeeper

pytestmark = pytest.mark.realtime

BOUND_S = 5.0


def _until(done: threading.Event) -> None:
    assert done.wait(BOUND_S), "not within the bound"


def test_a_lease_is_renewed_while_held_and_never_after_its_release() -> None:
    keeper, renewals, third = LeaseKeeper(), [], threading.Event()

    def renew() -> None:
        renewals.append(time.monotonic())
        if len(renewals) == 3:
            third.set()

    start = time.monotonic()
    handle = keeper.hold(renew, 0.02)
    _until(third)
    keeper.release(handle)
    count = len(renewals)
    assert renewals[0] - start >= 0.02  # not before its interval
    time.sleep(0.1)  # five intervals: none comes
    assert len(renewals) == count and len(keeper) == 0


def test_release_returns_once_a_renewal_in_flight_has_ended() -> None:
    """The journal writes the receipt when `release` returns: a renewal still running
    then would overwrite it with the intent."""
    keeper, entered, go_on, ended = LeaseKeeper(), threading.Event(), threading.Event(), []

    def renew() -> None:
        entered.set()
        go_on.wait(BOUND_S)
        ended.append(True)

    handle = keeper.hold(renew, 0.01)
    _until(entered)
    released = threading.Event()
    releaser = threading.Thread(target=lambda: (keeper.release(handle), released.set()))
    releaser.start()
    assert not released.wait(0.05)  # held back while the renewal runs
    go_on.set()
    _until(released)
    assert ended == [True]
    releaser.join(BOUND_S)


def test_short_writes_do_not_wake_the_keeper_one_by_one() -> None:
    """A hold wakes the keeper's thread only when it is due before the thread's next
    wake-up: a run of writes far shorter than their interval wakes it once."""
    keeper = LeaseKeeper()
    wakes: list[int] = []
    notify = keeper._wake.notify

    def counted(n: int = 1) -> None:
        wakes.append(n)
        notify(n)

    keeper._wake.notify = counted  # type: ignore[method-assign]
    for _ in range(1000):
        keeper.release(keeper.hold(lambda: None, 60.0))
    assert len(wakes) <= 1
    shorter = threading.Event()
    keeper.release(keeper.hold(lambda: None, 60.0))
    handle = keeper.hold(shorter.set, 0.01)  # due before the thread would wake: woken
    _until(shorter)
    keeper.release(handle)
