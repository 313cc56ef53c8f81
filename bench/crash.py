"""Crash-safe writes under real process kills: the chaos harness of the tests, at scale.

Run: ``.venv/bin/python -m bench.crash [--kills 1000] [--seed 0] [--configs ...]
[--storages ...] [--points ...] [--no-postgres]``

Every configuration (`tests.chaos.worker.CONFIGS`: the baselines `ToolNode` and
`ToolNode` + `ToolRetryMiddleware`, then our adapters) on every storage (SQLite and
PostgreSQL, with a store and with the checkpointer only; PostgreSQL when a throwaway
server starts) is killed at every point (the worker's own points, two replicas, and
random moments, which get three shares of the kills), round robin (in a seeded
shuffled order) until ``--kills``
kills are played. Each kill is one agent step that sends two emails; a fresh worker
resumes the thread (`tests.chaos.harness`).

The table has one line per configuration x storage x kill point: kills, workers that
died (a random kill may land after the run ended), mean emails sent per call, calls sent
more than once, silent duplicates (no lookup, no person allowed the extra send),
unanswered calls, false answers (``duplicate_call`` / "still running" about the model's
own call, or a success for an email never sent), and how the calls were settled.
Written to ``bench/results/crash.json``; nothing is asserted (the tests do that).
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests import pg
from tests.chaos import harness
from tests.chaos.worker import CONFIGS, POINTS, STORAGES, setup_postgres

from . import _util

POINT_CYCLE = (*POINTS, "replicas", "random", "random", "random")
"""The kill points in the order kills are handed out (random moments get three shares)."""


def plan(kills: int, configs: Sequence[str], storages: Sequence[str], points: Sequence[str], seed: int) -> list[harness.Kill]:  # fmt: skip
    """`kills` kills, round robin over every configuration x storage x point (in a
    seeded shuffled order, so that a short run still spreads over all of them)."""
    cells = list(itertools.product(configs, storages, points))
    random.Random(seed).shuffle(cells)
    out = []
    for i in range(kills):
        config, storage, point = cells[i % len(cells)]
        out.append(harness.Kill(config, storage, point, seed + i))
    return out


def run(
    kills: int = 1000,
    *,
    seed: int = 0,
    configs: Sequence[str] = CONFIGS,
    storages: Sequence[str] = STORAGES,
    points: Sequence[str] = POINT_CYCLE,
    postgres: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    cluster: Any = None
    skipped = None
    if postgres and any(s.startswith("postgres") for s in storages):
        cluster = pg.start()
        if isinstance(cluster, str):
            skipped, cluster = cluster, None
        else:
            setup_postgres(cluster.url)
    if cluster is None:
        storages = [s for s in storages if not s.startswith("postgres")]
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="lrt-chaos-") as root:
            chaos = harness.Chaos(Path(root), pg_url=cluster.url if cluster else None)
            outcomes = []
            for n, kill in enumerate(plan(kills, configs, storages, points, seed), 1):
                outcomes.append(chaos.run(kill))
                if progress and n % 50 == 0:
                    print(f"  {n}/{kills} kills, {time.perf_counter() - start:.0f} s", flush=True)
            rows = harness.summarise(outcomes)
            controls = harness.summarise(chaos.controls)
    finally:
        if cluster is not None:
            cluster.stop()
    return {
        "kills": len(outcomes),
        "seconds": round(time.perf_counter() - start, 1),
        "seed": seed,
        "postgres": "played" if cluster is not None else f"skipped: {skipped or 'not asked'}",
        "rows": rows,
        "controls": controls,
        "totals": _totals(rows),
    }


def _totals(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per configuration: kills, silent duplicates, unanswered calls, false answers."""
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        t = out.setdefault(r["config"], {"kills": 0, "silent dup": 0, "unanswered": 0, "false": 0})
        for key in t:
            t[key] += r[key]
    return out


def table(result: dict[str, Any]) -> str:
    rows = [[r[c] for c in harness.COLUMNS] for r in result["rows"]]
    totals = [[c, *t.values()] for c, t in result["totals"].items()]
    lines = [
        f"{result['kills']} kills in {result['seconds']} s (seed {result['seed']}; "
        f"PostgreSQL {result['postgres']})",
        _util.format_table(harness.COLUMNS, rows),
        "",
        _util.format_table(["config", "kills", "silent dup", "unanswered", "false"], totals),
    ]
    errors = [e for r in result["rows"] for e in r["errors"]]
    if errors:
        lines.append(f"harness errors ({len(errors)}): {errors[:3]}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, quick: bool = False) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.crash", description=__doc__)
    parser.add_argument("--kills", type=int, default=50 if quick else 1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS))
    parser.add_argument("--storages", nargs="*", default=list(STORAGES))
    parser.add_argument("--points", nargs="*", default=list(POINT_CYCLE))
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--quick", action="store_true", help="50 kills")
    args = parser.parse_args(list(argv or []))
    kills = 50 if args.quick and args.kills == 1000 else args.kills
    result = run(
        kills, seed=args.seed, configs=args.configs, storages=args.storages,
        points=args.points, postgres=not args.no_postgres,
    )  # fmt: skip
    print(table(result))
    path = _util.save_json({"crash": result, "meta": _util.run_metadata()}, _util.RESULTS_DIR / "crash.json")  # fmt: skip
    print(f"written: {path}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
