"""Shared timing and reporting code for the benchmarks.

Timing: `interleave` runs every variant of one comparison once per round, in a rotated
order (ABCD, BCDA, ...), so that machine noise (other processes, CPU frequency) hits
all variants alike. Each variant reports the mean time per tool call of its round; the
result of a variant is the median of its per-round means.

Reporting: `format_table` prints aligned text tables, `save_json` writes the results
with enough metadata (versions, CPU count, load average) to judge a run later.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage

RESULTS_DIR = Path(__file__).parent / "results"

Batch = Callable[[], None]
"""Runs a prepared batch of invocations; the only thing that is timed."""
Prepare = Callable[[int], Batch]
"""Builds (untimed) a batch of `iters` invocations with fresh inputs."""


@dataclass(frozen=True)
class Timing:
    """Per-call seconds of one variant: one value per round, and their median.

    `per_round` is wall time; `cpu_per_round` is the CPU time of the whole process (all
    its threads) over the same batches, which other processes on a shared machine do
    not inflate (but which does not see time spent waiting for a thread to wake up).
    """

    per_round: tuple[float, ...]
    cpu_per_round: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        return statistics.median(self.per_round)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_per_round)


def _time_batch(prepare: Prepare, iters: int) -> tuple[float, float]:
    """(wall, process CPU) seconds of one batch of `iters` invocations."""
    batch = prepare(iters)
    cpu, start = time.process_time(), time.perf_counter()
    batch()
    return time.perf_counter() - start, time.process_time() - cpu


def calibrate(prepare: Prepare, target_s: float, max_iters: int = 5000) -> int:
    """Invocations per batch so that one batch of `prepare` takes about `target_s`."""
    one = min(_time_batch(prepare, 1)[0] for _ in range(3))
    return max(1, min(max_iters, int(target_s / max(one, 1e-7))))


def interleave(
    variants: Mapping[str, Prepare], *, rounds: int, iters: int, calls_per_iter: int
) -> dict[str, Timing]:
    """Time every variant `rounds` times, interleaved, as seconds per tool call."""
    names = list(variants)
    for name in names:  # warm-up: imports, schema caches, lazily started threads
        _time_batch(variants[name], 1)
    samples: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        gc.collect()  # once per round, so no variant pays for another's garbage
        k = r % len(names)
        for name in names[k:] + names[:k]:
            wall, used = _time_batch(variants[name], iters)
            samples[name].append(wall / (iters * calls_per_iter))
            cpu[name].append(used / (iters * calls_per_iter))
    return {name: Timing(tuple(samples[name]), tuple(cpu[name])) for name in names}


def ratios(timings: Mapping[str, Timing], baseline: str, *, cpu: bool = False) -> dict[str, float]:
    """Median per-call time (wall, or CPU) of each variant divided by the baseline's."""
    if cpu:
        base = timings[baseline].cpu_median
        return {name: t.cpu_median / base for name, t in timings.items()}
    base = timings[baseline].median
    return {name: t.median / base for name, t in timings.items()}


def round_ratio_range(timings: Mapping[str, Timing], baseline: str) -> dict[str, list[float]]:
    """Min and max of the per-round ratios: how much the rounds disagreed (noise)."""
    base = timings[baseline].per_round
    out = {}
    for name, t in timings.items():
        per = [a / b for a, b in zip(t.per_round, base, strict=True)]
        out[name] = [round(min(per), 3), round(max(per), 3)]
    return out


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p95 and max of `values` (nearest-rank percentiles)."""
    data = sorted(values)

    def rank(p: float) -> float:
        return data[min(len(data) - 1, max(0, round(p * len(data) + 0.5) - 1))]

    return {"p50": rank(0.50), "p95": rank(0.95), "max": data[-1], "n": len(data)}


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain aligned text table (floats with 3 significant decimals)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
        return str(v)

    text = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in text)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in text]
    return "\n".join(lines)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def run_metadata(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Where and with what a run was made."""
    dists = ("langchain-resilient-tools", "langgraph", "langgraph-prebuilt", "langchain-core")
    return {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(["python -m bench", *(argv or [])]),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "loadavg_1m_at_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "versions": {d: _version(d) for d in dists},
    }


def save_json(results: Mapping[str, Any], path: Path | None = None) -> Path:
    """Write `results` to ``bench/results/latest.json`` (or `path`)."""
    path = path or RESULTS_DIR / "latest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return path


def load_json(path: Path | None = None) -> dict[str, Any]:
    """The results saved by `save_json` (an empty dict when there are none)."""
    path = path or RESULTS_DIR / "latest.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def per_call_us(fn: Callable[[], Any], reps: int) -> float:
    """Best-of-5 mean microseconds of one `fn()` (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - start) / reps)
    return best * 1e6


def answers(result: Any) -> list[tuple[Any, ...]]:
    """What a run answered, as the model reads it: each `ToolMessage`'s content, status,
    call id and tool name (in a node's or graph's ``{"messages": [...]}``, or alone)."""
    messages = result.get("messages", []) if isinstance(result, dict) else [result]
    return [
        (m.content, m.status, m.tool_call_id, m.name)
        for m in messages
        if isinstance(m, ToolMessage)
    ]


def check_same_answers(
    variants: Mapping[str, Any],
    baseline: str,
    mode: str,
    loop: Any,
    given: Callable[[Any], tuple[Any, Any]],
) -> None:
    """Raise when a variant answers otherwise than `baseline`: a benchmark times only
    variants that do the same work (a broken build answering every call with an error
    would otherwise look fast). Each variant (a runnable) answers once, ``invoke`` or, on
    `loop`, ``ainvoke`` (`mode`), the input and config `given` returns for it."""

    def run(variant: Any) -> Any:
        value, config = given(variant)
        if mode == "sync":
            return variant.invoke(value, config)
        return loop.run_until_complete(variant.ainvoke(value, config))

    expected = answers(run(variants[baseline]))
    if not expected:
        raise RuntimeError(f"{baseline} answered no tool call")
    for name, variant in variants.items():
        got = answers(run(variant))
        if got != expected:
            raise RuntimeError(
                f"{name} answers otherwise than {baseline}: {got!r} != {expected!r}; "
                "its time would not be comparable"
            )
