"""Worker processes for the Redis tests (multiprocessing spawn): each on its own client.

Nothing is shared with the test process but the Redis server at `url`.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import redis

from langchain_resilient_tools.state.redis import RedisBackend


def _backend(url: str) -> RedisBackend:
    return RedisBackend(redis.Redis.from_url(url))


def claim(url: str, keys: list[str], barrier: Any, out: Any) -> None:
    """Claim every key of `keys` (all workers together); put the keys this one won."""
    backend = _backend(url)
    barrier.wait(60)
    out.put([k for k in keys if backend.claim("race", k, os.getpid(), ttl=60)])


def take(url: str, key: str, rate: float, burst: float, for_s: float, barrier: Any, out: Any) -> None:  # fmt: skip
    """Take tokens from bucket `key` for `for_s` seconds of the server's time; put the
    server-time interval (before, after) around each token taken."""
    backend = _backend(url)
    barrier.wait(60)
    until = backend.now() + for_s
    taken: list[tuple[float, float]] = []
    while (before := backend.now()) < until:
        wait = backend.take_token(key, rate=rate, burst=burst)
        if wait == 0.0:
            taken.append((before, backend.now()))
        else:
            time.sleep(min(wait, 0.05))
    out.put(taken)


def hold(url: str, key: str, ttl: float, out: Any) -> None:
    """Take the one slot of `key`, say when (the server's time before taking it), and
    hang until killed: a worker that dies holding a lease."""
    backend = _backend(url)
    before = backend.now()
    assert backend.acquire_lease(key, cap=1, holder=f"pid-{os.getpid()}", ttl=ttl)
    out.put(before)
    signal.pause()
