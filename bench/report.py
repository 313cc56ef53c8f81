"""The benchmark results as Markdown, for the documentation site.

The docs never type a measured figure by hand: `docs/hooks.py` replaces two kinds of
marker with what this module renders from ``bench/results/*.json`` at build time:

- a line ``<!-- results: tail.json -->`` (or ``latest.json#wrapper`` for one section of
  a file) becomes that file's table, headed by when and how it was measured;
  ``<!-- results: others -->`` renders every results file the page has not named yet
  (so a new benchmark's file shows up without editing the page);
- an inline ``{{ tail.json: verdict/sync/extra_share | .1% }}`` becomes one value of a
  file (a ``/``-separated path; ``key=value,key2=value2`` picks the one element of a list
  that has those values), formatted with a Python format spec.

A file that is not there renders as "not measured yet"; a path that a present file does
not have raises `KeyError`, which fails the strict docs build (a figure cannot drift
from the file it names).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).parent / "results"
NOT_MEASURED = "*not measured yet*"

Renderer = Callable[[dict[str, Any]], str]


def load(name: str, results_dir: Path = RESULTS_DIR) -> dict[str, Any] | None:
    """The results file `name` (``tail.json``), or `None` when it is missing."""
    path = results_dir / name
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _meta(data: Mapping[str, Any]) -> str:
    """One line on how a result was measured (its ``meta``), or nothing."""
    meta = data.get("meta") or {}
    if not meta:
        return ""
    parts = [f"measured {meta.get('timestamp', '?')}", f"Python {meta.get('python', '?')}"]
    if "cpu_count" in meta:
        load_1m = meta.get("loadavg_1m_at_start")
        load_text = f", load {load_1m:.1f} at start" if isinstance(load_1m, int | float) else ""
        parts.append(f"{meta['cpu_count']} cores{load_text}")
    if "command" in meta:
        parts.append(f"`{meta['command']}`")
    return "<small>" + "; ".join(parts) + "</small>"


def _ms(value: Any) -> str:
    return f"{value:.0f}" if isinstance(value, int | float) else str(value)


# -- one renderer per file (or section of latest.json) -------------------------------


def _overhead(data: dict[str, Any]) -> str:
    from . import overhead  # the table `python -m bench` prints, written once

    return overhead.markdown(data["overhead"])


def _wrapper(data: dict[str, Any]) -> str:
    from . import wrapper

    return wrapper.markdown(data["wrapper"])


def _overhead_plain(data: dict[str, Any]) -> str:
    """An overhead run as ratios to `ToolNode` (runs that predate the timed peer)."""
    rows = []
    for c in data["overhead"]["cells"]:
        lo, hi = c["round_ratio_range"]["resilient_node"]
        rows.append(
            [c["mode"], c["context"], c["calls_per_message"], _ms(c["us_per_call"]["toolnode"]),
             f"{c['ratio']['resilient_node']:.2f}x ({lo:.2f}-{hi:.2f})",
             f"{c['ratio']['toolnode+retry_mw']:.2f}x", f"{c['ratio']['resilient_tool']:.2f}x"]
        )  # fmt: skip
    headers = ["mode", "context", "calls per message", "ToolNode µs/call",
               "ResilientToolNode / ToolNode (round range)", "ToolNode + ToolRetryMiddleware",
               "ToolNode([ResilientTool])"]  # fmt: skip
    return _table(headers, rows)


def _timeouts(data: dict[str, Any]) -> str:
    t = data["timeouts"]
    rows = [
        [mode, t["timeout_s"], v["n"], f"{v['p50']:.1f}", f"{v['p95']:.1f}", f"{v['max']:.1f}"]
        for mode, v in t["late_ms"].items()
    ]
    headers = ["mode", "timeout s", "hung calls", "late p50 ms", "late p95 ms", "late max ms"]
    return _table(headers, rows)


def _memory(data: dict[str, Any]) -> str:
    m = data["memory"]
    kept = m["retained_bytes_at"]
    headers = ["calls", *(f"retained KB after {int(n):,}" for n in kept), "growth, 2nd half",
               "bounded"]  # fmt: skip
    row = [f"{m['calls']:,}", *(f"{b / 1000:.0f}" for b in kept.values()),
           f"{m['retained_growth_second_half_bytes']:,} bytes", "yes" if m["bounded"] else "no"]  # fmt: skip
    return _table(headers, [row])


def _dedup(data: dict[str, Any]) -> str:
    per_call = _table(
        ["variant", "µs/call"], [[k, f"{v:.1f}"] for k, v in data["us_per_call"].items()]
    )
    memory = _table(
        ["dedup ledger", "KiB after 1,000", "KiB after 10,000", "KiB after 100,000", "peak KiB"],
        [[m["variant"], m["kib_after_1000"], m["kib_after_10000"], m["kib_after_100000"],
          m["peak_kib"]] for m in data["memory"]],
    )  # fmt: skip
    return f"{per_call}\n\n{memory}"


_TAIL_LABELS = {
    "ToolNode": "`ToolNode`",
    "ToolNode+ToolRetryMiddleware": "`ToolNode` + `ToolRetryMiddleware`",
    "ResilientToolNode": "`ResilientToolNode` (default)",
    "hedge=auto": '`ResilientToolNode`, `hedge="auto"`',
}


def _hedge_load(data: dict[str, Any]) -> str:
    from . import bench_hedge_load  # the table its run prints, written once

    return bench_hedge_load.markdown(data)


def _tail(data: dict[str, Any]) -> str:
    rows = []
    for mode, variants in data["modes"].items():
        for name, v in variants.items():
            t, o = v["tail"], v["outage"]
            rows.append(
                [mode, _TAIL_LABELS.get(name, name), _ms(t["p50_ms"]), _ms(t["p95_ms"]),
                 _ms(t["p99_ms"]), f"{t['extra_share']:.1%}", _ms(o["p50_ms"]),
                 f"{o['extra_share']:.1%}"]
            )  # fmt: skip
    headers = ["mode", "variant", "p50 ms", "p95 ms", "p99 ms", "extra attempts",
               "outage p50 ms", "outage extra"]  # fmt: skip
    return _table(headers, rows)


_CRASH_LABELS = {
    "toolnode": "`ToolNode`",
    "toolnode_retry": "`ToolNode` + `ToolRetryMiddleware` (`create_agent`)",
    "node": "`ResilientToolNode`",
    "node_verify": "`ResilientToolNode`, `verify`",
    "node_interrupt": '`ResilientToolNode`, `unknown_outcome="interrupt"`',
    "middleware": "`create_agent` + `ResilientToolsMiddleware`",
    "middleware_verify": "the same, `verify`",
}


def _crash(data: dict[str, Any]) -> str:
    c = data["crash"]
    rows = [
        [_CRASH_LABELS.get(name, name), t["kills"], t["silent dup"], t["unanswered"], t["false"]]
        for name, t in c["totals"].items()
    ]
    headers = ["configuration", "kills", "silent duplicate sends", "unanswered calls",
               "false answers"]  # fmt: skip
    note = f"{c['kills']:,} kills in all, seed {c['seed']}, PostgreSQL {c['postgres']}."
    return f"{_table(headers, rows)}\n\n{note}"


def _journal(data: dict[str, Any]) -> str:
    j = data["journal"]
    rows = [
        [_JOURNAL_STORES.get(store, store), f"{r['raw_us']:,.1f}", f"{r['added_us_per_write']:,.1f}",
         f"**{r['ratio']:.2f}x**", f"{r['added_us_per_write'] - r['raw_us']:,.1f}",
         " ".join(f"{x:.2f}" for x in r["ratio_per_round"]),
         "yes" if r["target_met"] else "**no**", f"{r['bare_us']:,.1f}",
         f"{r['ratio_to_bare']:.2f}x", f"{r['round_trips_per_write']:g}",
         f"{r['reads_per_write']:g}", f"{r['round_trips_per_read']:g}"]
        for store, r in j["rows"].items()
    ]  # fmt: skip
    headers = ["store", "store's own 2 puts, µs", "journal adds, µs", "ratio",
               "beyond the 2 puts, µs",
               f"ratio in each of {j['rounds']} parts of the run", f"≤ {j['target']:g}x",
               "the 2 puts alone, µs", "ratio to them", "store operations per write",
               "of which reads", "per read"]  # fmt: skip
    return _table(headers, rows)


_JOURNAL_STORES = {
    "inmemorystore": "`InMemoryStore`",
    "sqlite": "`SqliteStore` (WAL)",
    "postgres": "`PostgresStore` (fsync on)",
    "postgres_fsync_off": "`PostgresStore` (fsync off)",
}


def _breaker(data: dict[str, Any]) -> str:
    rows = [
        [scenario, r["variant"], r["service_calls"], r["answered"], f"{r['success_rate']:.1%}"]
        for scenario in ("down", "flaky")
        for r in data.get(scenario, [])
    ]
    headers = ["service", "variant", "calls the service got", "calls answered", "succeeded"]
    return f"{data['calls']} calls per run.\n\n" + _table(headers, rows)


def _backends(data: dict[str, Any]) -> str:
    rows = []
    for name, r in data["backends"]["rows"].items():
        ops = r.get("ops_us") or {}
        rows.append(
            [name, f"{r['us_per_call']:.0f}",
             "" if "added_vs_in_process_us" not in r else f"{r['added_vs_in_process_us']:+.0f}",
             " / ".join(f"{ops[k]:.0f}" for k in ("put", "get", "claim") if k in ops),
             f"{ops['take_token']:.0f}" if "take_token" in ops else ""]
        )  # fmt: skip
    headers = ["backend", "µs/call", "added µs vs in-process", "put / get / claim µs",
               "token bucket µs"]  # fmt: skip
    return f"Policy: {data['backends']['policy']}.\n\n" + _table(headers, rows)


def _limits(data: dict[str, Any]) -> str:
    if "runs" not in data:
        return f"{NOT_MEASURED} ({data.get('skipped', 'no runs')})."
    rows = [
        [r["workers"], "shared (`PostgresStore`)" if r["limits"] == "shared" else "per process",
         "" if r.get("max_tokens_per_1s_window") is None else r["max_tokens_per_1s_window"],
         r["max_per_1s_window"], f"{r['rate_over_run']:.1f}",
         f"{r['max_in_flight']} (cap {data['cap']})"]
        for r in data["runs"]
    ]  # fmt: skip
    headers = ["workers", "limits",
               f"most tokens the store gave in 1 s (bound {data['bound_per_1s_window']})",
               "most calls the tool saw in 1 s", "calls/s over the run",
               "most in flight at once"]  # fmt: skip
    cost, kill = data["cost"], data["kill"]
    ms, ops = cost["ms_per_call"], cost["ms_per_store_op"]
    cost_rows = [[name, f"{v:.2f}"] for name, v in ms.items()]
    cost_rows += [[f"store op: `{name}`", f"{v:.2f}"] for name, v in ops.items()]
    head = (
        f"`rate_limit={data['rate']}` (burst {data['burst']}) on `get_quote`, "
        f"`max_concurrency={data['cap']}` on `get_report` (each call {data['hold_s']} s), "
        "4 threads per worker. A worker killed while holding the only slot gave it back "
        f"after {kill['slot_back_after_kill_s']:.2f} s (`lease_s={kill['lease_s']:g}`)."
    )
    return (
        f"{head}\n\n{_table(headers, rows)}\n\nCost in one process (a tool under both "
        f"limits, never binding):\n\n{_table(['variant', 'ms per call'], cost_rows)}"
    )


def _checkpoints(data: dict[str, Any]) -> str:
    labels = {"toolnode": "`ToolNode`", "plain": "`ResilientToolNode`, `MessagesState`",
              "ledger": "`ResilientToolNode`, `ResilientToolsState`"}  # fmt: skip
    rows = [
        [labels.get(k, k), f"{v['total'] / 1e6:.1f}", f"{v['ratio']:.3f}x"]
        for k, v in data["variants"].items()
    ]
    head = (
        f"{data['steps']} steps, {data['reads_per_step']} reads of {data['result_chars']:,} "
        f"characters per step; target {data['target']}x, "
        f"{'met' if data['target_met'] else 'not met'}; a restarted graph "
        f"{'still reuses' if data['reused_after_restart'] else 'does not reuse'} step 1's result."
    )
    return head + "\n\n" + _table(["variant", "stored MB", "ratio"], rows)


def _instructions(data: dict[str, Any]) -> str:
    """Node cells (ToolNode beside it) and wrapper cells (the bare tool beside it), each
    as ratios to the peer with the same guarantee: the timed one (a per-call timeout)."""

    def ratio(cell: dict[str, Any], key: str) -> str:
        peer = cell.get("peer_ratio", {})
        return f"{peer[key]:.3f}x" if key in peer else ""

    rows = []
    for c in sorted(
        data["cells"], key=lambda c: (c["mode"] != "sync", str(c["calls_per_message"]))
    ):
        wrapper = c["calls_per_message"] == "wrapper"
        rows.append([
            c["mode"],
            "ResilientTool.wrap" if wrapper else f"ResilientToolNode, {c['calls_per_message']} per message",
            ratio(c, "wrapped" if wrapper else "resilient_node"),
            "" if wrapper else ratio(c, "attempt_only"),
            "" if wrapper else ratio(c, "adapter_only"),
            ratio(c, "tool" if wrapper else "toolnode"),
            f"{c['peer_target']}x" if "peer_target" in c else "",
        ])  # fmt: skip
    headers = ["mode", "adapter", "ours / timed peer", "lower bound (attempt stage only)",
               "lower bound (no stage, no deadline)", "untimed peer / timed peer",
               "target"]  # fmt: skip
    return _table(headers, rows)


_BREAKDOWN = (
    ("`ToolNode`", "toolnode", ""),
    ("the timed peer", "toolnode+timeout", "its timeout (`asyncio.wait_for`)"),
    ("`adapter_only`", "adapter_only", "the adapter's bookkeeping alone: a `Call` and its "
     "record, the step's twins, the answer's check, the statistics"),
    ("`attempt_only`", "attempt_only", "that, and the attempt stage's deadline (`runtime.drive`)"),
    ("`ResilientToolNode`", "resilient_node", "that, and every other stage the default policy applies"),
)  # fmt: skip


def _breakdown(data: dict[str, Any]) -> str:
    """The async node's cells that have the lower bounds (``--floor``): per variant, its
    instructions per call and its ratio to `ToolNode`; each of ours adds to the one
    before it (the timed peer only to `ToolNode`)."""
    rows = []
    for c in data["cells"]:
        counts = c["instructions_per_call"]
        if c["mode"] != "async" or "adapter_only" not in counts:
            continue
        for label, key, what in _BREAKDOWN:
            rows.append([c["calls_per_message"], label, f"{counts[key]:,}",
                         f"{c['ratio'][key]:.3f}x", what])  # fmt: skip
    if not rows:
        return f"{NOT_MEASURED} (run `python -m bench.instructions --floor`)."
    headers = ["calls per message", "variant", "instructions per call", "/ `ToolNode`",
               "what it adds to `ToolNode`"]  # fmt: skip
    return _table(headers, rows)


def generic(data: dict[str, Any], limit: int = 60) -> str:
    """Any results file: its leaves (but ``meta``) as a path / value table."""
    rows: list[list[Any]] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                if not (path == "" and k == "meta"):
                    walk(v, f"{path}/{k}" if path else str(k))
        elif (
            isinstance(value, list) and value and not all(isinstance(v, int | float) for v in value)
        ):
            for i, v in enumerate(value):
                walk(v, f"{path}/{i}")
        else:
            rows.append([f"`{path}`", value])

    walk(data, "")
    more = f"\n\n... and {len(rows) - limit} more values." if len(rows) > limit else ""
    return _table(["result", "value"], rows[:limit]) + more


RENDERERS: dict[str, Renderer] = {
    "latest.json#overhead": _overhead,
    "latest.json#wrapper": _wrapper,
    "latest.json#timeouts": _timeouts,
    "latest.json#memory": _memory,
    "latest-py312.json#overhead": _overhead_plain,
    "tail.json": _tail,
    "hedge_load.json": _hedge_load,
    "crash.json": _crash,
    "journal.json": _journal,
    "dedup.json": _dedup,
    "breaker.json": _breaker,
    "backends.json": _backends,
    "limits.json": _limits,
    "checkpoints.json": _checkpoints,
    "instructions.json": _instructions,
    "instructions.json#breakdown": _breakdown,
}
"""Renderers by file (``name#section`` for one part of a file); any other file that is
present gets `generic`."""


def render(ref: str, results_dir: Path = RESULTS_DIR) -> str:
    """The Markdown for a ``<!-- results: REF -->`` marker (``tail.json``, ``latest.json#wrapper``)."""
    name = ref.split("#", 1)[0]
    data = load(name, results_dir)
    if data is None:
        return f"{NOT_MEASURED} (`bench/results/{name}` is not there)."
    renderer = RENDERERS.get(ref) or (generic if "#" not in ref else None)
    if renderer is None:
        raise KeyError(f"no renderer for {ref!r}")
    meta = _meta(data)
    return renderer(data) + (f"\n\n{meta}" if meta else "")


def others(named: Iterable[str], results_dir: Path = RESULTS_DIR) -> str:
    """Every results file present that `named` (file names) does not include, each under
    a heading of its own (nothing when there is none)."""
    seen = {ref.split("#", 1)[0] for ref in named}
    parts = [
        f"### `{path.name}`\n\n{render(path.name, results_dir)}"
        for path in sorted(results_dir.glob("*.json"))
        if path.name not in seen
    ]
    return "\n\n".join(parts)


def figure(name: str, path: str, spec: str = "", results_dir: Path = RESULTS_DIR) -> str:
    """One value of a results file, formatted with `spec` (a Python format spec)."""
    data = load(name, results_dir)
    if data is None:
        return NOT_MEASURED
    value: Any = data
    for part in path.strip("/").split("/"):
        if isinstance(value, list) and "=" in part:
            wanted = dict(cond.split("=", 1) for cond in part.split(","))
            matches = [
                v
                for v in value
                if isinstance(v, Mapping) and all(str(v.get(k)) == w for k, w in wanted.items())
            ]
            if len(matches) != 1:
                raise KeyError(f"{name}: {len(matches)} elements with {part!r} in {path!r}")
            value = matches[0]
        elif isinstance(value, list):
            value = value[int(part)]
        elif isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            raise KeyError(f"{name} has no {path!r} (at {part!r})")
    return format(value, spec)
