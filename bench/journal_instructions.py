"""The journal's work on ``InMemoryStore`` counted in instructions (callgrind), beside the
store's own two puts: ``python -m bench.journal_instructions``.

Wall time on a shared machine moves from one run to the next by more than what is
compared here (`bench.bench_journal` measured the same journal at 2.41x and 2.49x of
raw on hosts 1.6 times apart in speed); the number of instructions a write executes
moves by a few percent (string hashing is randomized per process: 1.46x and 1.42x in
two runs). Three arms of `bench.bench_journal`, each a batch of `ITERATIONS` calls in one
valgrind process (callgrind collects only inside the batches, as in
`bench.instructions`):

- ``on`` and ``off``: a write through `ResilientTool.wrap` with ``store=``, the journal
  on and off (``added``: their difference per write);
- ``puts``: the store's own two puts of the journal's intent and receipt, as
  `bench.bench_journal`'s raw arm makes them (a namespace as deep, a key of the same
  form, the captured entries), its keys made before the batch (``raw``).

Instructions do not see what a cache miss or a stalled pipeline costs: a piece of code
that runs once per call amid a LangChain call's work (the journal's) takes longer per
instruction than two puts made back to back. Read it beside the wall-time ratio, not
instead of it. Needs ``valgrind`` on the PATH; about two minutes.
"""

from __future__ import annotations

import argparse
import functools
import gc
import shutil
import sys
from collections.abc import Callable
from typing import Any

from langgraph.store.memory import InMemoryStore

from .bench_journal import RAW_NS, _caller, _journaled, _raw_key, _stored, send_email
from .instructions import callgrind

ITERATIONS = 200
"""Calls per measured batch (instructions are exact: few are needed)."""
ARMS = ("on", "off", "puts")


def _arms(store: Any, calls: int) -> dict[str, Callable[[int], Any]]:
    entries = _journaled(store, send_email, 1).written
    intent, receipt = _stored(entries[0]), _stored(entries[-1])
    keys = iter([_raw_key() for _ in range(calls)])

    def puts(i: int) -> None:
        key = next(keys)
        store.put(RAW_NS, key, intent, index=False)
        store.put(RAW_NS, key, receipt, index=False)

    return {
        "on": _caller(send_email, store, True),
        "off": _caller(send_email, store, False),
        "puts": puts,
    }


def _child() -> None:
    """Runs inside valgrind: each arm's batch inside one `functools.reduce` call, whose
    start zeroes callgrind's counters and whose end dumps them."""
    warm = 20
    arms = _arms(InMemoryStore(), warm + ITERATIONS)
    for n, (name, fn) in enumerate(arms.items()):
        base = (n + 1) * 10**6
        for i in range(warm):
            fn(base - 1 - i)

        def batch(fn: Callable[[int], Any] = fn, base: int = base) -> None:
            for i in range(ITERATIONS):
                fn(base + i)

        gc.collect()
        functools.reduce(lambda _a, _b, batch=batch: batch(), [0, 0])
        print(f"MEASURED {name}", flush=True)


def measure() -> dict[str, Any] | None:
    """Instructions per write of each arm, ``added`` (on - off), ``raw`` (the two puts)
    and ``ratio`` (added / raw); `None` without valgrind."""
    if shutil.which("valgrind") is None:
        print("instructions: skipped (valgrind is not on the PATH)", file=sys.stderr)
        return None
    batches = callgrind("bench.journal_instructions")
    if [words for words, _ in batches] != [[name] for name in ARMS]:
        raise RuntimeError(f"expected the batches {ARMS}, found {batches}")
    per = {words[0]: total / ITERATIONS for words, total in batches}
    added, raw = per["on"] - per["off"], per["puts"]
    return {
        "iterations": ITERATIONS,
        "per_write": {name: round(v) for name, v in per.items()},
        "added": round(added),
        "raw": round(raw),
        "ratio": round(added / raw, 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    if parser.parse_args().child:
        _child()
    else:
        print(measure())
