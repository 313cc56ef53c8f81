"""Hedged reads on a busy machine: the tail benchmark, quiet and contended, side by side.

``python -m bench.bench_hedge_load [--quick] [--steps N] [--neighbours N] [--block N]``

The heavy-tailed read service of `bench.bench_tail` (most reads take about 50 ms, 3% stall
for 0.6 s), five parallel reads per step, `ToolNode` and ``ResilientToolNode(hedge="auto")``
side by side (one thread, or one task, each). Two conditions take turns in blocks of
`BLOCK` steps, so that whatever else the machine runs weighs on both alike:

- quiet: nothing added;
- contended: `NEIGHBOURS_PER_CORE` x the cores of CPU-bound processes beside the benchmark
  (a load of five times the cores). They are its own children, in its session, so they
  compete with its threads for the cores directly, as the processes of one container do
  (a desktop kernel's autogroups would shield it from neighbours started elsewhere). They
  are stopped between contended blocks, not restarted.

Each condition has its own nodes and services, so what hedging learns under load (its
delay, its budget) is learned under load; both services draw the same latencies (those
of `bench.bench_tail`'s tail phase), so the conditions differ by the load alone. Reported per mode and condition: the p50, p95
and p99 step latency of both, the p99 ratio, the extra attempts (every hedge sent,
cancelled ones included, per call, from ``stats()``; and the service's executions beyond
one per call, which a hedge cancelled before it reached the service is not), the budget
(share and burst), the delay the hedge stage had learned at the end, and the load average.
Before each mode is timed, one full collection clears what the imports and the set-up
left (owed, it would otherwise come in the first blocks). Also the interpreter's full
garbage collections during each mode (how many, the longest)
and, per variant, how many of its steps one of them fell in: a full collection walks the
whole heap of a process that imports LangChain with every thread stopped, which at this
load stretches to most of a second, longer than any stall.
Writes ``bench/results/hedge_load.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import math
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_resilient_tools import Hedge
from langchain_resilient_tools.pipeline.hedge.logic import auto_delay

from . import _util
from .bench_tail import READS, STALL_P, ReadService, _message, _node
from .overhead import _DIRECT_CONFIG

STEPS = 500
BLOCK = 25
NEIGHBOURS_PER_CORE = 5
SETTLE_S = 0.2
"""Pause after the neighbours are started or stopped, before a block's first step."""
VARIANTS = ("ToolNode", "hedge=auto")
CONDITIONS = ("quiet", "contended")
TARGET_P99_RATIO = 0.3
TARGET_EXTRA = 0.05

_SPIN = """
import ctypes, os, sys
try:
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: gone with the benchmark
except Exception:
    pass
parent, n = int(sys.argv[1]), 0
while True:
    n += 1
    if n % 5_000_000 == 0 and os.getppid() != parent:
        break
"""


class Neighbours:
    """`n` CPU-bound child processes, started once; `busy(True/False)` resumes or stops them."""

    def __init__(self, n: int, settle_s: float = SETTLE_S) -> None:
        self.n = n
        self.settle_s = settle_s
        argv = [sys.executable, "-c", _SPIN, str(os.getpid())]
        self._procs = [subprocess.Popen(argv) for _ in range(n)]
        self.busy(False)

    def busy(self, on: bool) -> None:
        sig = signal.SIGCONT if on else signal.SIGSTOP
        for proc in self._procs:
            proc.send_signal(sig)
        time.sleep(self.settle_s)

    def close(self) -> None:
        for proc in self._procs:
            proc.kill()
        for proc in self._procs:
            proc.wait()


@contextlib.contextmanager
def neighbours(n: int, settle_s: float = SETTLE_S) -> Iterator[Neighbours]:
    crowd = Neighbours(n, settle_s)
    try:
        yield crowd
    finally:
        crowd.close()


class Cell:
    """One variant under one condition: its service, node and step latencies. The
    service of each condition draws the latencies of `bench.bench_tail`'s tail phase
    (same seed, same queries): quiet and contended meet the same stragglers, and the
    same hedges stall too."""

    def __init__(self, mode: str, condition: str, variant: str) -> None:
        self.service = ReadService(mode)
        self.node = _node(variant, self.service.tool())
        self.tag = "tail"
        self.spans: list[tuple[float, float]] = []
        """Each step's start and end (`time.perf_counter`)."""

    @property
    def latencies(self) -> list[float]:
        """Each step's latency, in seconds."""
        return [end - start for start, end in self.spans]

    def stall_free(self) -> list[float]:
        """The latencies of the steps none of whose reads drew a stall on its first
        attempt (the same draw as `ReadService.latency`'s): no hedge can shorten them."""

        def stalls(step: int) -> bool:
            queries = (
                m["args"]["query"] for m in _message(self.tag, step)["messages"][0].tool_calls
            )
            return any(random.Random(f"{self.service.seed}/{q}/1").random() < STALL_P
                       for q in queries)  # fmt: skip

        return [s for step, s in enumerate(self.latencies) if not stalls(step)]

    def steps(self, lo: int, hi: int) -> None:
        for step in range(lo, hi):
            start = time.perf_counter()
            self.node.invoke(_message(self.tag, step), _DIRECT_CONFIG)
            self.spans.append((start, time.perf_counter()))

    async def asteps(self, lo: int, hi: int) -> None:
        for step in range(lo, hi):
            start = time.perf_counter()
            await self.node.ainvoke(_message(self.tag, step), _DIRECT_CONFIG)
            self.spans.append((start, time.perf_counter()))


class Worker:
    """A thread of its own for one sync `Cell`, kept for the whole run (as an application
    keeps its threads): it runs the blocks it is given."""

    def __init__(self, cell: Cell) -> None:
        self.cell = cell
        self._todo: queue.SimpleQueue[tuple[int, int] | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while (block := self._todo.get()) is not None:
            self.cell.steps(*block)
            self._done.put(None)

    def start(self, lo: int, hi: int) -> None:
        self._todo.put((lo, hi))

    def wait(self) -> None:
        self._done.get()

    def close(self) -> None:
        self._todo.put(None)
        self._thread.join()


class FullCollections:
    """The interpreter's full (generation 2) garbage collections while it is on, each as
    its start and end (`time.perf_counter`)."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self._began = 0.0

    def _seen(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.spans.append((self._began, time.perf_counter()))

    def __enter__(self) -> FullCollections:
        gc.callbacks.append(self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._seen)

    def steps_met(self, cell: Cell) -> int:
        """How many of `cell`'s steps a full collection fell in (wholly or in part)."""
        return sum(any(b < end and e > start for b, e in self.spans) for start, end in cell.spans)

    def summary(self) -> dict[str, Any]:
        longest = max((e - b for b, e in self.spans), default=0.0)
        return {"count": len(self.spans), "longest_ms": round(longest * 1000, 1)}


def _blocks(steps: int, block: int) -> list[tuple[int, int]]:
    return [(lo, min(steps, lo + block)) for lo in range(0, steps, block)]


def _run_sync(cells: dict[tuple[str, str], Cell], crowd: Neighbours, steps: int, block: int,
              loads: list[float]) -> None:  # fmt: skip
    workers = {key: Worker(cell) for key, cell in cells.items()}
    try:
        for lo, hi in _blocks(steps, block):
            for condition in CONDITIONS:
                crowd.busy(condition == "contended")
                group = [w for (c, _), w in workers.items() if c == condition]
                for worker in group:
                    worker.start(lo, hi)
                for worker in group:
                    worker.wait()
            loads.append(os.getloadavg()[0])
    finally:
        crowd.busy(False)
        for worker in workers.values():
            worker.close()


async def _run_async(cells: dict[tuple[str, str], Cell], crowd: Neighbours, steps: int,
                     block: int, loads: list[float]) -> None:  # fmt: skip
    try:
        for lo, hi in _blocks(steps, block):
            for condition in CONDITIONS:
                crowd.busy(condition == "contended")
                group = [cell for (c, _), cell in cells.items() if c == condition]
                await asyncio.gather(*(cell.asteps(lo, hi) for cell in group))
            loads.append(os.getloadavg()[0])
    finally:
        crowd.busy(False)


def _q(ordered: list[float], p: float) -> float:
    return round(ordered[max(0, math.ceil(p * len(ordered)) - 1)] * 1000, 1)


def _latency(cell: Cell) -> dict[str, Any]:
    ordered, calm = sorted(cell.latencies), sorted(cell.stall_free())
    return {"steps": len(ordered), "p50_ms": _q(ordered, 0.50), "p95_ms": _q(ordered, 0.95),
            "p99_ms": _q(ordered, 0.99), "stall_free_steps": len(calm),
            "stall_free_p99_ms": _q(calm, 0.99)}  # fmt: skip


def _hedging(cell: Cell) -> dict[str, Any]:
    """What the hedge stage did: hedges sent (from ``stats()``, cancelled ones included),
    executions the service saw beyond one per call, and the delay it had learned."""
    calls = len(cell.latencies) * READS
    rows = {row["tool"]: row for row in cell.node.stats().rows()}
    sent = rows["get_doc"]["hedges"]
    served = sum(cell.service.executions.values()) - calls
    stage = next(s for s in cell.node.pipeline.stages if s.name == "hedge")
    history = stage.histories.peek("get_doc")
    delay = None if history is None else auto_delay(history.snapshot(), Hedge().min_delay)
    return {"calls": calls, "hedges_sent": sent, "extra_share": round(sent / calls, 4),
            "extra_served_share": round(served / calls, 4),
            "delay_ms": None if delay is None else round(delay * 1000, 1)}  # fmt: skip


def _summary(cells: dict[tuple[str, str], Cell], loads: list[float],
             collections: FullCollections) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {"loadavg_1m": round(sum(loads) / len(loads), 1),
                           "full_collections": collections.summary()}  # fmt: skip
    for condition in CONDITIONS:
        base = _latency(cells[condition, "ToolNode"])
        hedged = _latency(cells[condition, "hedge=auto"])
        base["steps_in_full_collection"] = collections.steps_met(cells[condition, "ToolNode"])
        hedged["steps_in_full_collection"] = collections.steps_met(cells[condition, "hedge=auto"])
        hedging = _hedging(cells[condition, "hedge=auto"])
        ratio = hedged["p99_ms"] / base["p99_ms"]
        out[condition] = {
            "ToolNode": base, "hedge=auto": hedged, "hedging": hedging,
            "p99_ratio_to_toolnode": round(ratio, 3),
            # The best ratio any hedging could reach here: the hedged run's p99 over
            # the steps that drew no stall (which a hedge cannot shorten) to ToolNode's.
            "stall_free_p99_ratio": round(hedged["stall_free_p99_ms"] / base["p99_ms"], 3),
            "p99_target_met": ratio <= TARGET_P99_RATIO,
            "extra_target_met": max(hedging["extra_share"], hedging["extra_served_share"])
            <= TARGET_EXTRA,
        }  # fmt: skip
    return out


def run(*, steps: int = STEPS, block: int = BLOCK, neighbours_n: int | None = None,
        settle_s: float = SETTLE_S) -> dict[str, Any]:  # fmt: skip
    """Both modes, both conditions; `neighbours_n`: the contended condition's neighbours
    (`NEIGHBOURS_PER_CORE` x the cores by default)."""
    n = neighbours_n if neighbours_n is not None else NEIGHBOURS_PER_CORE * (os.cpu_count() or 1)
    modes: dict[str, Any] = {}
    with neighbours(n, settle_s) as crowd:
        for mode in ("sync", "async"):
            cells = {(c, v): Cell(mode, c, v) for c in CONDITIONS for v in VARIANTS}
            loads: list[float] = []
            # What the imports and the set-up left for the collector is collected now,
            # not by a full collection owed by them in the first blocks (it came about
            # 14 s into the run, 0.4 s long at this load, in one of the measured steps).
            gc.collect()
            with FullCollections() as collections:
                if mode == "sync":
                    _run_sync(cells, crowd, steps, block, loads)
                else:
                    asyncio.run(_run_async(cells, crowd, steps, block, loads))
            modes[mode] = _summary(cells, loads, collections)
    hedge = Hedge()
    return {
        "settings": {"steps": steps, "block": block, "neighbours": n,
                     "cpu_count": os.cpu_count(), "reads_per_step": READS,
                     "budget": hedge.budget, "burst": hedge.burst},
        "modes": modes,
    }  # fmt: skip


def _rows(result: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for mode, conditions in result["modes"].items():
        for condition in CONDITIONS:
            r = conditions[condition]
            b, h, g = r["ToolNode"], r["hedge=auto"], r["hedging"]
            rows.append([mode, condition, b["p50_ms"], b["p95_ms"], b["p99_ms"], h["p50_ms"],
                         h["p95_ms"], h["p99_ms"], f"{r['p99_ratio_to_toolnode']:.2f}x",
                         f"{r['stall_free_p99_ratio']:.2f}x",
                         f"{g['extra_share']:.1%}", f"{g['extra_served_share']:.1%}",
                         g["delay_ms"]])  # fmt: skip
    return rows


_HEADERS = ["mode", "condition", "ToolNode p50 ms", "p95", "p99", "hedged p50 ms", "p95", "p99",
            "p99 ratio", "stall-free p99 ratio", "extra attempts", "extra served",
            "learned delay ms"]  # fmt: skip


def _note(result: dict[str, Any]) -> str:
    s, modes = result["settings"], result["modes"]
    loads = ", ".join(f"{mode} {m['loadavg_1m']:.1f}" for mode, m in modes.items())
    full = "; ".join(_collections(mode, m) for mode, m in modes.items())
    return (f"contended: {s['neighbours']} CPU-bound neighbours on {s['cpu_count']} cores; "
            f"load average during the runs: {loads}; hedge budget {s['budget']:.0%} of the calls, "
            f"burst {s['burst']} (saved up inside the share); full garbage collections: {full}")  # fmt: skip


def _collections(mode: str, m: dict[str, Any]) -> str:
    """A mode's full collections, and the hedged steps they fell in, per condition."""
    full = m.get("full_collections")
    if full is None:  # a result from before they were counted
        return f"{mode} not counted"
    met = ", ".join(f"{c} {m[c]['hedge=auto'].get('steps_in_full_collection', 0)}"
                    for c in CONDITIONS)  # fmt: skip
    return (f"{mode} {full['count']} (longest {full['longest_ms']:.0f} ms; hedged steps "
            f"they fell in: {met})")  # fmt: skip


def table(result: dict[str, Any]) -> str:
    return _util.format_table(_HEADERS, _rows(result)) + "\n" + _note(result)


def markdown(result: dict[str, Any]) -> str:
    """The table for the docs (`bench.report`)."""
    lines = ["| " + " | ".join(_HEADERS) + " |", "|" + "---|" * len(_HEADERS)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in _rows(result)]
    return "\n".join(lines) + "\n\n" + _note(result) + "."


def main(argv: Sequence[str] | None = None, *, quick: bool = False) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--block", type=int, default=BLOCK)
    parser.add_argument("--neighbours", type=int, default=None)
    args = parser.parse_args(argv)
    quick = quick or args.quick
    steps, block = (40, 10) if quick else (args.steps, args.block)
    result = run(steps=steps, block=block, neighbours_n=args.neighbours)
    print(table(result))
    if not quick:
        meta = _util.run_metadata()
        meta["command"] = " ".join(["python -m bench.bench_hedge_load", *(argv or [])])
        _util.save_json({"meta": meta, **result}, _util.RESULTS_DIR / "hedge_load.json")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
