"""The wrapper's own cost: ``ResilientTool.wrap(t).invoke(call)`` against ``t.invoke(call)``.

`overhead` times the wrapper inside a `ToolNode`, where ToolNode's own cost hides it;
this benchmark calls both tools directly with a ToolCall (what `create_agent` and
``bind_tools`` users get), sync and async, interleaved, with the default policy and
with ``timeout=None`` (no deadline, so no hand-off to a worker thread: what the
deadline guarantee costs is the difference). Reports per-call microseconds, the ratio
of medians to the bare tool, the spread of per-round ratios and the added microseconds.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from langchain_resilient_tools import ResilientTool, ToolPolicy

from . import _util

BASELINE = "tool"
TARGETS = {"sync": 1.30, "async": 1.20}
"""Issue #16: wrapped / bare, ratio of medians, py3.11."""
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
        "wrapped": ResilientTool.wrap(tool),
        "wrapped_no_timeout": ResilientTool.wrap(tool, policy=ToolPolicy(timeout=None)),
    }


def _prepare(tool: BaseTool, mode: str, loop: asyncio.AbstractEventLoop | None) -> _util.Prepare:
    def prepare(iters: int) -> _util.Batch:
        calls = [
            {"name": tool.name, "args": {"x": n}, "id": f"w{next(_ids)}", "type": "tool_call"}
            for n in range(iters)
        ]
        if mode == "sync":

            def batch() -> None:
                for call in calls:
                    tool.invoke(call)

            return batch

        async def abatch() -> None:
            for call in calls:
                await tool.ainvoke(call)

        assert loop is not None
        return lambda: loop.run_until_complete(abatch())

    return prepare


def run_cell(mode: str, *, rounds: int, target_s: float) -> dict[str, Any]:
    tools = variants(make_tool())
    loop = asyncio.new_event_loop() if mode == "async" else None
    try:
        prepares = {k: _prepare(t, mode, loop) for k, t in tools.items()}
        iters = _util.calibrate(prepares[BASELINE], target_s)
        timings = _util.interleave(prepares, rounds=rounds, iters=iters, calls_per_iter=1)
    finally:
        if loop is not None:
            loop.close()
    ratio = _util.ratios(timings, BASELINE)
    base_us = timings[BASELINE].median * 1e6
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
    }


def run(*, rounds: int = 15, target_s: float = 0.1) -> dict[str, Any]:
    return {"cells": [run_cell(m, rounds=rounds, target_s=target_s) for m in ("sync", "async")]}


def table(result: dict[str, Any]) -> str:
    rows = []
    for c in result["cells"]:
        for name in ("wrapped", "wrapped_no_timeout"):
            lo, hi = c["round_ratio_range"][name]
            rows.append(
                [
                    c["mode"], name, c["us_per_call"][BASELINE], c["us_per_call"][name],
                    c["added_us"][name], c["ratio"][name], f"{lo:.2f}-{hi:.2f}",
                    c["target"] if name == "wrapped" else "",
                ]
            )  # fmt: skip
    headers = ["mode", "variant", "bare us", "wrapped us", "added us", "ratio", "range", "target"]
    return _util.format_table(headers, rows)


def markdown(result: dict[str, Any], other: dict[str, Any] | None = None) -> str:
    """The README's table: wrapped / bare, the per-round spread and the added µs per
    call; `other` (a run on another Python, with its ``python`` key) adds its columns."""
    py = (other or {}).get("python", "other")
    head = "| mode | variant | bare µs/call | ratio (round range) | added µs/call |"
    rule = "|---|---|---|---|---|"
    if other is not None:
        head += f" ratio, py{py} | added µs, py{py} |"
        rule += "---|---|"
    lines = [head + " target |", rule + "---|"]
    others = {c["mode"]: c for c in (other or {}).get("cells", [])}

    def cols(c: dict[str, Any], name: str) -> str:
        lo, hi = c["round_ratio_range"][name]
        ratio = f"{c['ratio'][name]:.2f}x"
        if name == "wrapped" and c["target_met"]:
            ratio = f"**{ratio}**"
        return f"{ratio} ({lo:.2f}-{hi:.2f}) | {c['added_us'][name]:+.0f}"

    for c in result["cells"]:
        for name in ("wrapped", "wrapped_no_timeout"):
            label = "default policy" if name == "wrapped" else "`timeout=None`"
            row = f"| {c['mode']} | {label} | {c['us_per_call'][BASELINE]:.0f} | {cols(c, name)} |"
            if other is not None and c["mode"] in others:
                row += f" {cols(others[c['mode']], name)} |"
            row += f" {c['target']}x |" if name == "wrapped" else " |"
            lines.append(row)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    result = run()
    print(table(result))
    return result


if __name__ == "__main__":
    main()
