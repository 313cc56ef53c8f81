"""Run every benchmark: ``python -m bench [--quick] [--only NAME ...] [--no-chart]``.

Runs the happy-path overhead, timeout precision and memory benchmarks, then the
``main()`` of each optional benchmark module that exists (`OPTIONAL`). Prints each
table, writes ``bench/results/latest.json`` (``--only`` keeps the other benchmarks'
results there, listed in ``meta.kept_from_previous_run``) and, if matplotlib is
installed, ``bench/results/overhead.png``.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from . import _util, memory, overhead, timeouts, wrapper

OPTIONAL = (
    "bench_repair",
    "bench_dedup",
    "bench_breaker",
    "bench_backends",
    "bench_journal",
    "bench_dangling",
    "bench_checkpoints",
    "crash",
    "bench_tail",
    "bench_hedge_load",
    "bench_builtins",
    "bench_redact",
    "bench_tasks",
    "bench_limits",
)
"""Benchmark modules owned elsewhere; each is run through its ``main()`` if present."""


def _own(quick: bool) -> dict[str, Callable[[], tuple[dict[str, Any], str]]]:
    def run_overhead() -> tuple[dict[str, Any], str]:
        result = overhead.run(**overhead.quick_settings()) if quick else overhead.run()
        return result, overhead.table(result)

    def run_timeouts() -> tuple[dict[str, Any], str]:
        result = timeouts.run(samples=5 if quick else 30)
        return result, timeouts.table(result)

    def run_memory() -> tuple[dict[str, Any], str]:
        result = memory.run(calls=500 if quick else 100_000)
        return result, memory.table(result)

    def run_wrapper() -> tuple[dict[str, Any], str]:
        result = wrapper.run(rounds=3, target_s=0.01) if quick else wrapper.run()
        return result, wrapper.table(result)

    return {
        "overhead": run_overhead,
        "wrapper": run_wrapper,
        "timeouts": run_timeouts,
        "memory": run_memory,
    }


def _call_main(module: Any, quick: bool) -> Any:
    """Call ``module.main``: with ``quick=`` if it takes it, else with its own defaults.

    A ``main()`` that parses ``sys.argv`` itself sees no arguments (ours are not its).
    """
    params = inspect.signature(module.main).parameters
    if "quick" in params:
        return module.main(quick=quick)
    if "argv" in params:
        return module.main([])
    saved = sys.argv
    sys.argv = [f"bench.{module.__name__.rsplit('.', 1)[-1]}"]
    try:
        return module.main()
    finally:
        sys.argv = saved


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    parser.add_argument("--only", nargs="*", help="benchmark names to run (default: all)")
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"meta": _util.run_metadata(list(argv or sys.argv[1:]))}
    failed = []
    for name, job in _own(args.quick).items():
        if args.only and name not in args.only:
            continue
        start = time.perf_counter()
        print(f"\n== {name}", flush=True)
        results[name], text = job()
        print(text)
        print(f"({time.perf_counter() - start:.1f} s)", flush=True)
    for name in OPTIONAL:
        if args.only and name not in args.only:
            continue
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{name}":
                raise
            continue
        print(f"\n== {name}", flush=True)
        try:
            out = _call_main(module, args.quick)
        except (Exception, SystemExit):  # one broken optional benchmark loses no others
            traceback.print_exc()
            failed.append(name)
            continue
        if isinstance(out, dict):
            results[name] = out
    if args.only:  # a partial run keeps the other benchmarks' latest results
        previous = _util.load_json()
        kept = sorted(k for k in previous if k not in results and k != "meta")
        results["meta"]["kept_from_previous_run"] = kept
        results = {**previous, **results}
    path = _util.save_json(results)
    print(f"\nresults: {path}")
    if "overhead" in results and not args.no_chart:
        png = overhead.chart(results["overhead"])
        print(f"chart: {png}" if png else "chart: skipped (matplotlib is not installed)")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
