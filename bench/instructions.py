"""Happy-path overhead as CPU *instructions* per tool call, under valgrind (callgrind).

Wall time on a shared 2-core machine moves by 10-20% from one run to the next, more than
the differences worth measuring. The number of instructions a call executes does not:
this benchmark counts them for the ``direct`` cells of `bench.overhead` (the same tool,
inputs and variants, the timed peer among them) and, with ``--wrapper``, for the cells
of `bench.wrapper` (the bare tool, the timed bare tool, the wrapped tool), with
callgrind collecting only inside the measured batches, and prints the ratios to
`ToolNode` (or the bare tool) and to the timed peer (the binding baseline). It does not
see what instruction counts cannot (thread wake-up latency, cache misses), so the sync
path's thread hand-offs are under-weighted: read it next to the wall-time table, not
instead of it.

Needs ``valgrind`` on the PATH (``apt install valgrind``); every cell runs in one valgrind
process (the imports are paid once): a few minutes in all.

    python -m bench.instructions [--calls 1 10] [--modes async sync] [--quick] [--floor]
                                 [--wrapper]

``--floor`` adds two lower bounds. ``attempt_only``: a `ResilientToolNode` whose pipeline
keeps only the attempt stage (the per-attempt deadline), i.e. the adapter plus the one
guarantee no policy can turn off. ``adapter_only`` (async cells): one whose pipeline keeps
no stage at all, not even the deadline, i.e. what the adapter's own bookkeeping costs (a
`Call` and its record, the statistics, the twins of a step, the check of the answer).
Users cannot build either; they show how much of the overhead the optional stages cost
and how much is left without them. (A sync step of several calls reaches its worker
threads through the attempt stage, so ``adapter_only`` has no sync cells.)

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

from . import _util, overhead, wrapper

VARIANTS = ("toolnode", overhead.PEER, "resilient_node")
WRAPPER_VARIANTS = (wrapper.BASELINE, wrapper.PEER, "wrapped")
WRAPPER = "wrapper"
"""The ``calls`` of a `bench.wrapper` cell (one tool call per invocation)."""
FLOOR = "attempt_only"
ADAPTER_FLOOR = "adapter_only"
ITERS = {1: 60, 10: 8, 100: 1}
"""Measured invocations per cell (instructions are exact: few are needed)."""


def attempt_only(tool: Any) -> ResilientToolNode:
    """The `FLOOR` variant: a node that keeps only the attempt stage of its pipeline."""
    node = ResilientToolNode([tool])
    node.pipeline.stages = [s for s in node.pipeline.stages if s.name == "attempt"]
    return node


def adapter_only(tool: Any) -> ResilientToolNode:
    """The `ADAPTER_FLOOR` variant (async): a node whose pipeline keeps no stage."""
    node = ResilientToolNode([tool])
    node.pipeline.stages = []
    return node


def _floors(mode: str, tool: Any) -> dict[str, Any]:
    """The lower bounds of a node cell (`--floor`): `FLOOR`, and `ADAPTER_FLOOR` in async."""
    floors = {FLOOR: attempt_only(tool)}
    if mode == "async":
        floors[ADAPTER_FLOOR] = adapter_only(tool)
    return floors


Cell = tuple[str, int | str]
"""(mode, calls): tool calls per message, or `WRAPPER` for the wrapper's cell."""


def _iters(calls: int | str) -> int:
    return ITERS[1] if calls == WRAPPER else ITERS.get(int(calls), 4)


def _prepares(
    mode: str, calls: int | str, loop: asyncio.AbstractEventLoop, floor: bool
) -> dict[str, _util.Prepare]:
    """The variants of one cell, each as a `bench._util.Prepare`."""
    if calls == WRAPPER:
        tools = wrapper.variants(wrapper.make_tool())
        wrapper.check_answers({k: tools[k] for k in WRAPPER_VARIANTS}, mode, loop)
        return {
            name: wrapper._prepare(tools[name], mode, loop, timed=name == wrapper.PEER)
            for name in WRAPPER_VARIANTS
        }
    tool = overhead.make_tool()
    nodes: dict[str, Any] = dict(overhead.make_nodes(tool))
    floors = _floors(mode, tool) if floor else {}
    nodes.update(floors)
    names = (*VARIANTS, *floors)
    overhead.check_answers({k: nodes[k] for k in names}, mode, int(calls), loop)
    return {name: overhead._prepare(nodes[name], mode, int(calls), loop) for name in names}


def _child(cells: Sequence[Cell], floor: bool = False) -> None:
    """Runs inside valgrind (one process for every cell: the imports are paid once):
    each variant's batch inside one `functools.reduce` call; callgrind zeroes its
    counters when the call starts and dumps them when it ends, so each dump holds the
    batch's instructions on every thread (the sync path's workers too)."""
    loop = asyncio.new_event_loop()
    for mode, calls in cells:
        for name, prepare in _prepares(mode, calls, loop, floor).items():
            prepare(20)()  # warm-up, not collected
            batch = prepare(_iters(calls))
            gc.collect()
            functools.reduce(lambda _a, _b, batch=batch: batch(), [0, 0])
            print(f"MEASURED {mode}:{calls} {name}", flush=True)


def _totals(out_dir: Path) -> list[int]:
    """Instruction totals of the dumps made after each measured batch, in order."""
    totals = []
    dumps = sorted(out_dir.glob("cg.out.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
    for path in dumps:
        match = re.search(r"^summary: (\d+)", path.read_text(), re.MULTILINE)
        if match and int(match.group(1)) > 1_000_000:  # imports call reduce too: skip those
            totals.append(int(match.group(1)))
    return totals


def callgrind(module: str, *args: str) -> list[tuple[list[str], int]]:
    """Run ``python -m module --child *args`` under callgrind, which counts only inside
    each measured batch (one `functools.reduce` call, after which the child prints a
    ``MEASURED`` line): each such line's words after ``MEASURED``, with its batch's
    instructions."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={tmp}/cg.out",
            "--zero-before=functools_reduce",
            "--dump-after=functools_reduce",
            sys.executable,
            "-m",
            module,
            "--child",
            *args,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        measured = [ln.split()[1:] for ln in proc.stdout.splitlines() if ln.startswith("MEASURED")]
        totals = _totals(Path(tmp))
    if len(totals) != len(measured):
        raise RuntimeError(f"expected {len(measured)} callgrind dumps, found {len(totals)}")
    return list(zip(measured, totals, strict=True))


def _measure(cells: Sequence[Cell], floor: bool) -> dict[str, dict[str, int]]:
    """``{"mode:calls": {variant: instructions of its batch}}``, from one valgrind run."""
    specs = [f"{mode}:{calls}" for mode, calls in cells]
    batches = callgrind("bench.instructions", *specs, *(["--floor"] if floor else []))
    out: dict[str, dict[str, int]] = {spec: {} for spec in specs}
    for (spec, name), total in batches:
        out[spec][name] = total
    return out


def cell_result(mode: str, calls: int | str, totals: dict[str, int]) -> dict[str, Any]:
    """One (mode, calls) cell: instructions per call of every variant, and the ratios."""
    per_call = {
        n: t / (_iters(calls) * (1 if calls == WRAPPER else int(calls))) for n, t in totals.items()
    }
    base_name, peer_name = (
        (wrapper.BASELINE, wrapper.PEER) if calls == WRAPPER else ("toolnode", overhead.PEER)
    )
    base, peer = per_call[base_name], per_call[peer_name]
    return {
        "mode": mode,
        "calls_per_message": calls,
        "instructions_per_call": {k: round(v) for k, v in per_call.items()},
        "ratio": {k: round(v / base, 3) for k, v in per_call.items()},
        "peer_ratio": {k: round(v / peer, 3) for k, v in per_call.items()},
        "target_resilient_node": overhead.TARGETS[mode] if calls != WRAPPER else None,
        "peer_target": wrapper.PEER_TARGET if calls == WRAPPER else overhead.PEER_TARGET,
    }


def table(result: dict[str, Any]) -> str:
    floor = any(FLOOR in c["ratio"] for c in result["cells"])
    headers = ["mode", "calls", "baseline kIr/call", "peer kIr/call", "ours kIr/call"]
    headers += ["ours / baseline", "ours / peer"]
    headers += [f"{FLOOR} ratio", f"{ADAPTER_FLOOR} ratio"] if floor else []
    headers += ["target", "peer target"]
    rows = []
    for c in result["cells"]:
        ours = "wrapped" if c["calls_per_message"] == WRAPPER else "resilient_node"
        base, peer = (
            (wrapper.BASELINE, wrapper.PEER)
            if c["calls_per_message"] == WRAPPER
            else ("toolnode", overhead.PEER)
        )
        counts = c["instructions_per_call"]
        rows.append(
            [
                c["mode"],
                c["calls_per_message"],
                counts[base] / 1000,
                counts[peer] / 1000 if peer in counts else "-",
                counts[ours] / 1000,
                c["ratio"][ours],
                c.get("peer_ratio", {}).get(ours, "-"),
                *(
                    [c["ratio"].get(FLOOR, "-"), c["ratio"].get(ADAPTER_FLOOR, "-")]
                    if floor
                    else []
                ),
                c.get("target_resilient_node") or "-",
                c.get("peer_target", "-"),
            ]
        )
    return _util.format_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> dict[str, Any] | None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--child"]:
        specs = [a.split(":") for a in args[1:] if a != "--floor"]
        _child([(m, c if c == WRAPPER else int(c)) for m, c in specs], floor="--floor" in args)
        return None
    parser = argparse.ArgumentParser(prog="python -m bench.instructions")
    parser.add_argument("--calls", type=int, nargs="*", default=[1, 10])
    parser.add_argument("--modes", nargs="*", default=["async", "sync"])
    parser.add_argument("--quick", action="store_true", help="one async cell")
    parser.add_argument(
        "--wrapper", action="store_true", help="add the wrapper's cells (`bench.wrapper`)"
    )
    parser.add_argument(
        "--floor", action="store_true", help="add the lower bounds (see the docstring)"
    )
    opts = parser.parse_args(args)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: skipped")
        return {"skipped": "valgrind is not installed"}
    cells: list[tuple[str, int | str]] = (
        [("async", 1)] if opts.quick else [(m, n) for m in opts.modes for n in opts.calls]
    )
    if opts.wrapper:
        cells += [(m, WRAPPER) for m in opts.modes]
    meta = _util.run_metadata(args)
    meta["command"] = " ".join(["python -m bench.instructions", *args])
    totals = _measure(cells, opts.floor)
    result = {
        "meta": meta,
        "cells": [cell_result(mode, n, totals[f"{mode}:{n}"]) for mode, n in cells],
    }
    print(table(result))
    if not opts.quick:
        print(f"written to {_util.save_json(result, _util.RESULTS_DIR / 'instructions.json')}")
    return result


if __name__ == "__main__":
    main()
