"""Happy-path overhead as CPU *instructions* per tool call, under valgrind (callgrind).

Wall time on a shared 2-core machine moves by 10-20% from one run to the next, more than
the differences worth measuring. The number of instructions a call executes does not:
this benchmark counts them for the ``direct`` cells of `bench.overhead` (the same tool,
inputs and variants), with callgrind collecting only inside the measured batches, and
prints the ratios to `ToolNode`. It does not see what instruction counts cannot
(thread wake-up latency, cache misses), so the sync path's thread hand-offs are
under-weighted: read it next to the wall-time table, not instead of it.

Needs ``valgrind`` on the PATH (``apt install valgrind``); about a minute per cell.

    python -m bench.instructions [--calls 1 10] [--modes async sync] [--quick] [--floor]

``--floor`` adds a lower bound, ``attempt_only``: a `ResilientToolNode` whose pipeline
keeps only the attempt stage (the per-attempt deadline), i.e. the adapter plus the one
guarantee no policy can turn off. Users cannot build it; it shows how much of the
overhead the optional stages cost and how much is left without them.

Writes ``bench/results/instructions.json`` (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_resilient_tools import ResilientToolNode

from . import _util, overhead

VARIANTS = ("toolnode", "resilient_node")
FLOOR = "attempt_only"
ITERS = {1: 60, 10: 8, 100: 1}
"""Measured invocations per cell (instructions are exact: few are needed)."""


def attempt_only(tool: Any) -> ResilientToolNode:
    """The `FLOOR` variant: a node that keeps only the attempt stage of its pipeline."""
    node = ResilientToolNode([tool])
    node.pipeline.stages = [s for s in node.pipeline.stages if s.name == "attempt"]
    return node


def _child(mode: str, calls: int, iters: int, floor: bool = False) -> None:
    """Runs inside valgrind: each variant's batch inside one `functools.reduce` call;
    callgrind zeroes its counters when the call starts and dumps them when it ends, so
    each dump holds the batch's instructions on every thread (the sync path's workers
    too)."""
    tool = overhead.make_tool()
    nodes: dict[str, Any] = dict(overhead.make_nodes(tool))
    names = list(VARIANTS)
    if floor:
        nodes[FLOOR] = attempt_only(tool)
        names.append(FLOOR)
    loop = asyncio.new_event_loop()
    config = overhead._DIRECT_CONFIG
    for name in names:
        node = nodes[name]

        def run(states: list[dict[str, Any]], node: Any = node) -> None:
            if mode == "sync":
                for state in states:
                    node.invoke(state, config)
                return

            async def go() -> None:
                for state in states:
                    await node.ainvoke(state, config)

            loop.run_until_complete(go())

        run(overhead.make_inputs(20, calls))  # warm-up, not collected
        states = overhead.make_inputs(iters, calls)
        gc.collect()
        functools.reduce(lambda _a, _b, states=states: run(states), [0, 0])
        print(f"MEASURED {name}", flush=True)


def _totals(out_dir: Path) -> list[int]:
    """Instruction totals of the dumps made after each measured batch, in order."""
    totals = []
    dumps = sorted(out_dir.glob("cg.out.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
    for path in dumps:
        match = re.search(r"^summary: (\d+)", path.read_text(), re.MULTILINE)
        if match and int(match.group(1)) > 1_000_000:  # imports call reduce too: skip those
            totals.append(int(match.group(1)))
    return totals


def run_cell(mode: str, calls: int, *, floor: bool = False) -> dict[str, Any]:
    """Instructions per call of every variant for one (mode, calls) cell."""
    iters = ITERS.get(calls, 4)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={tmp}/cg.out",
            "--zero-before=functools_reduce",
            "--dump-after=functools_reduce",
            sys.executable,
            "-m",
            "bench.instructions",
            "--child",
            mode,
            str(calls),
            str(iters),
            *(["--floor"] if floor else []),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        names = [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("MEASURED")]
        totals = _totals(Path(tmp))
    if len(totals) != len(names):
        raise RuntimeError(f"expected {len(names)} callgrind dumps, found {len(totals)}")
    per_call = {n: t / (iters * calls) for n, t in zip(names, totals, strict=True)}
    base = per_call["toolnode"]
    return {
        "mode": mode,
        "calls_per_message": calls,
        "instructions_per_call": {k: round(v) for k, v in per_call.items()},
        "ratio": {k: round(v / base, 3) for k, v in per_call.items()},
        "target_resilient_node": overhead.TARGETS[mode],
    }


def table(result: dict[str, Any]) -> str:
    floor = any(FLOOR in c["ratio"] for c in result["cells"])
    headers = ["mode", "calls", "toolnode kIr/call", "resilient_node kIr/call", "ratio"]
    headers += [f"{FLOOR} ratio"] if floor else []
    rows = [
        [
            c["mode"],
            c["calls_per_message"],
            c["instructions_per_call"]["toolnode"] / 1000,
            c["instructions_per_call"]["resilient_node"] / 1000,
            c["ratio"]["resilient_node"],
            *([c["ratio"].get(FLOOR, "-")] if floor else []),
            c["target_resilient_node"],
        ]
        for c in result["cells"]
    ]
    headers.append("target")
    return _util.format_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> dict[str, Any] | None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--child"]:
        _child(args[1], int(args[2]), int(args[3]), floor="--floor" in args)
        return None
    parser = argparse.ArgumentParser(prog="python -m bench.instructions")
    parser.add_argument("--calls", type=int, nargs="*", default=[1, 10])
    parser.add_argument("--modes", nargs="*", default=["async", "sync"])
    parser.add_argument("--quick", action="store_true", help="one async cell")
    parser.add_argument(
        "--floor", action="store_true", help=f"add the {FLOOR} lower bound (see the docstring)"
    )
    opts = parser.parse_args(args)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: skipped")
        return {"skipped": "valgrind is not installed"}
    cells = [("async", 1)] if opts.quick else [(m, n) for m in opts.modes for n in opts.calls]
    meta = _util.run_metadata(args)
    meta["command"] = " ".join(["python -m bench.instructions", *args])
    result = {"meta": meta, "cells": [run_cell(mode, n, floor=opts.floor) for mode, n in cells]}
    print(table(result))
    if not opts.quick:
        print(f"written to {_util.save_json(result, _util.RESULTS_DIR / 'instructions.json')}")
    return result


if __name__ == "__main__":
    main()
