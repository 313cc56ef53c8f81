"""Which reused reads are still fresh: a count of the writes that took effect per thread.

A write that took effect in a thread may have changed whatever the thread's reads
returned before it, and nothing says what it changed (an order's status, a line's
roaming, a balance). So every write that ran (it succeeded, or failed in a way that it
may have taken effect: an unknown outcome's check must read the truth) bumps its
thread's epoch (`wrote`, by the pipeline's driver; again when an attempt that timed out
ends on its thread), and the keys under which dedup and the result cache reuse a read
(`core.key.call_key`, `core.key.result_key`) include the epoch (`epoch`): a read made
before the write is not reused after it, it runs again; repeated reads between two
writes are still reused. Writes' keys do not include it: a repeat of a write that
succeeded is blocked whatever came after it.

The epochs are process-wide (a write through one adapter makes another adapter's reads
of the thread stale, as when each tool is wrapped on its own) and keep thread ids and
counts only. They are bounded (least recently used threads are forgotten after
`MAX_THREADS`, every thread after `TTL_S` without a write), far beyond the dedup
ledger's own bounds, so a forgotten epoch never brings back an entry that is still kept.
Each worker process counts its own writes; where workers share dedup through a store,
a write also leaves its time there, and a read another worker made before it is not
reused either (`pipeline.dedup.shared`).
"""

from __future__ import annotations

import threading

from cachetools import TTLCache

MAX_THREADS = 200_000
"""Threads whose epoch is kept at once."""
TTL_S = 7 * 86_400.0
"""A thread's epoch is forgotten this long after its last write."""

_lock = threading.Lock()
_epochs: TTLCache[str, int] = TTLCache(MAX_THREADS, TTL_S)


def wrote(thread_id: str) -> None:
    """A write took effect in `thread_id`: its earlier reads are stale."""
    with _lock:
        _epochs[thread_id] = _epochs.get(thread_id, 0) + 1


def epoch(thread_id: str | None) -> int:
    """How many writes took effect in `thread_id` (0 without a thread)."""
    if not thread_id:
        return 0
    return _epochs.get(thread_id, 0)
