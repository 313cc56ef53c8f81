"""The wrapper's own cost: ``ResilientTool.wrap(t).invoke(call)`` against ``t.invoke(call)``.

`overhead` times the wrapper inside a `ToolNode`, where ToolNode's own cost hides it;
this benchmark calls both tools directly with a ToolCall (what `create_agent` and
``bind_tools`` users get), sync and async, interleaved, with the default policy and
with ``timeout=None`` (no deadline, so no hand-off to a worker thread: what the
deadline guarantee costs is the difference). Reports per-call microseconds, the ratio
of medians to the bare tool, the spread of per-round ratios and the added microseconds.

The binding baseline (issue 27) is **the timed bare tool** (``tool+timeout``): the bare
tool run with a timeout by hand, the guarantee the wrapper's default policy gives (sync:
``future.result(timeout)`` on a persistent pool, in a copy of the caller's context;
async: ``asyncio.wait_for``). Target: the wrapper at most 1.10x of it.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from collections.abc import Sequence
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from langchain_resilient_tools import ResilientTool, ToolPolicy

from . import _util
from .overhead import PEER_POOL, TIMEOUT_S

BASELINE = "tool"
PEER = "tool+timeout"
"""The bare tool run with a timeout by hand: the binding baseline."""
PEER_TARGET = 1.10
"""Issue 27: wrapped / timed bare tool, ratio of medians, py3.11."""
TARGETS = {"sync": 1.30, "async": 1.20}
"""Issue #16 (superseded by `PEER_TARGET`): wrapped / bare, ratio of medians, py3.11."""
_ids = itertools.count()


def make_tool() -> BaseTool:
    def get_value(x: int) -> str:
        """Echo a value."""
        return str(x)

    async def aget_value(x: int) -> str:
        """Echo a value."""
        return str(x)

    return StructuredTool.from_function(get_value, coroutine=aget_value)


def variants(tool: BaseTool) -> dict[str, BaseTool]:
    return {
        BASELINE: tool,
        PEER: tool,  # run with a timeout by `_prepare`
        "wrapped": ResilientTool.wrap(tool),
        "wrapped_no_timeout": ResilientTool.wrap(tool, policy=ToolPolicy(timeout=None)),
    }


def _prepare(
    tool: BaseTool, mode: str, loop: asyncio.AbstractEventLoop | None, *, timed: bool = False
) -> _util.Prepare:
    def prepare(iters: int) -> _util.Batch:
        calls = [
            {"name": tool.name, "args": {"x": n}, "id": f"w{next(_ids)}", "type": "tool_call"}
            for n in range(iters)
        ]
        if mode == "sync" and timed:

            def timed_batch() -> None:
                for call in calls:
                    ctx = contextvars.copy_context()
                    PEER_POOL.submit(ctx.run, tool.invoke, call).result(timeout=TIMEOUT_S)

            return timed_batch
        if mode == "sync":

            def batch() -> None:
                for call in calls:
                    tool.invoke(call)

            return batch

        async def abatch() -> None:
            for call in calls:
                if timed:
                    await asyncio.wait_for(tool.ainvoke(call), TIMEOUT_S)
                else:
                    await tool.ainvoke(call)

        assert loop is not None
        return lambda: loop.run_until_complete(abatch())

    return prepare


def check_answers(
    tools: dict[str, BaseTool], mode: str, loop: asyncio.AbstractEventLoop | None
) -> None:
    """Every variant answers one fixed call as `BASELINE` does (`_util.check_same_answers`)."""
    _util.check_same_answers(
        tools, BASELINE, mode, loop,
        lambda t: ({"name": t.name, "args": {"x": 7}, "id": "check", "type": "tool_call"}, None),
    )  # fmt: skip


def run_cell(mode: str, *, rounds: int, target_s: float) -> dict[str, Any]:
    tools = variants(make_tool())
    loop = asyncio.new_event_loop() if mode == "async" else None
    try:
        check_answers(tools, mode, loop)
        prepares = {k: _prepare(t, mode, loop, timed=k == PEER) for k, t in tools.items()}
        iters = _util.calibrate(prepares[BASELINE], target_s)
        timings = _util.interleave(prepares, rounds=rounds, iters=iters, calls_per_iter=1)
    finally:
        if loop is not None:
            loop.close()
    ratio = _util.ratios(timings, BASELINE)
    peer_ratio = _util.ratios(timings, PEER)
    base_us = timings[BASELINE].median * 1e6
    peer_us = timings[PEER].median * 1e6
    return {
        "mode": mode,
        "rounds": rounds,
        "iters_per_round": iters,
        "us_per_call": {k: round(t.median * 1e6, 2) for k, t in timings.items()},
        "added_us": {k: round(t.median * 1e6 - base_us, 2) for k, t in timings.items()},
        "ratio": {k: round(v, 3) for k, v in ratio.items()},
        "round_ratio_range": _util.round_ratio_range(timings, BASELINE),
        "target": TARGETS[mode],
        "target_met": ratio["wrapped"] <= TARGETS[mode],
        "peer_ratio": {k: round(v, 3) for k, v in peer_ratio.items()},
        "peer_added_us": {k: round(t.median * 1e6 - peer_us, 2) for k, t in timings.items()},
        "peer_round_ratio_range": _util.round_ratio_range(timings, PEER),
        "peer_target": PEER_TARGET,
        "peer_target_met": peer_ratio["wrapped"] <= PEER_TARGET,
    }


def run(*, rounds: int = 15, target_s: float = 0.1) -> dict[str, Any]:
    return {"cells": [run_cell(m, rounds=rounds, target_s=target_s) for m in ("sync", "async")]}


def table(result: dict[str, Any]) -> str:
    rows = []
    for c in result["cells"]:
        for name in ("wrapped", "wrapped_no_timeout"):
            lo, hi = c["peer_round_ratio_range"][name]
            rows.append(
                [
                    c["mode"], name, c["us_per_call"][BASELINE], c["us_per_call"][PEER],
                    c["us_per_call"][name], c["ratio"][name], c["peer_ratio"][name],
                    f"{lo:.2f}-{hi:.2f}", c["peer_added_us"][name],
                    c["peer_target"] if name == "wrapped" else "",
                ]
            )  # fmt: skip
    headers = ["mode", "variant", "bare us", "timed bare us", "wrapped us", "/ bare",
               "/ timed bare", "range", "added us vs timed", "target"]  # fmt: skip
    return _util.format_table(headers, rows)


def markdown(result: dict[str, Any], other: dict[str, Any] | None = None) -> str:
    """The docs' table (docs/benchmarks.md): wrapped / timed bare tool (the binding target) and wrapped /
    bare, each with the per-round spread and the added µs per call; `other` (a run on
    another Python, with its ``python`` key) adds its ratio to the timed bare tool."""
    py = (other or {}).get("python", "other")
    head = (
        "| mode | variant | bare µs/call | timed bare µs/call "
        "| wrapped / timed bare (round range) | added µs/call |"
    )
    rule = "|---|---|---|---|---|---|"
    if other is not None:
        head += f" wrapped / timed bare, py{py} | added µs, py{py} |"
        rule += "---|---|"
    head += " target | wrapped / bare (round range) | added µs/call |"
    rule += "---|---|---|"
    lines = [head, rule]
    others = {c["mode"]: c for c in (other or {}).get("cells", [])}

    def cols(c: dict[str, Any], name: str, *, peer: bool) -> str:
        ratios, spread, added = (
            (c["peer_ratio"], c["peer_round_ratio_range"], c["peer_added_us"])
            if peer
            else (c["ratio"], c["round_ratio_range"], c["added_us"])
        )
        lo, hi = spread[name]
        ratio = f"{ratios[name]:.2f}x"
        if peer and name == "wrapped" and c["peer_target_met"]:
            ratio = f"**{ratio}**"
        return f"{ratio} ({lo:.2f}-{hi:.2f}) | {added[name]:+.0f}"

    for c in result["cells"]:
        for name in ("wrapped", "wrapped_no_timeout"):
            label = "default policy" if name == "wrapped" else "`timeout=None`"
            row = (
                f"| {c['mode']} | {label} | {c['us_per_call'][BASELINE]:.0f} "
                f"| {c['us_per_call'][PEER]:.0f} | {cols(c, name, peer=True)} |"
            )
            if other is not None:
                o = others.get(c["mode"])
                row += f" {cols(o, name, peer=True)} |" if o and "peer_ratio" in o else " | |"
            row += f" {c['peer_target']:.2f}x |" if name == "wrapped" else " |"
            row += f" {cols(c, name, peer=False)} |"
            lines.append(row)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    result = run()
    print(table(result))
    return result


if __name__ == "__main__":
    main()
