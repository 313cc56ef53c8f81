"""Plots of call events over time (matplotlib is an optional import)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..core.errors import UsageError


class CallEvent(Protocol):
    """What a plot reads of one finished call (`observe.stats.CallEvent` has it)."""

    @property
    def tool(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def duration_ms(self) -> float: ...
    @property
    def at(self) -> float: ...
    @property
    def status(self) -> str: ...
    @property
    def hedges(self) -> int: ...


def plot_events(events: Sequence[CallEvent], *, ax: Sequence[Any] | None = None) -> Any:
    """Draw latency (top) and outcomes (bottom) of `events` over time, per tool."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise UsageError("plot() needs matplotlib: pip install matplotlib") from exc
    if ax is None:
        fig, (lat_ax, out_ax) = plt.subplots(
            2, 1, sharex=True, figsize=(9, 5), layout="constrained"
        )
    else:
        lat_ax, out_ax = ax
        fig = lat_ax.figure
    t0 = min((e.at for e in events), default=0.0)

    def end(e: CallEvent) -> float:  # when the call was answered (a hang shows late)
        return e.at - t0 + e.duration_ms / 1000

    tools = sorted({e.tool for e in events})
    statuses = sorted({e.status for e in events}, key=lambda s: (s != "success", s))
    for tool in tools:
        mine = sorted((e for e in events if e.tool == tool), key=end)
        (line,) = lat_ax.plot(
            [end(e) for e in mine], [e.duration_ms for e in mine], "o-", label=tool
        )
        failed = [e for e in mine if e.outcome != "success"]
        if failed:  # the moments that matter: failures stand out on their tool's line
            lat_ax.scatter(
                [end(e) for e in failed],
                [e.duration_ms for e in failed],
                s=90,
                marker="X",
                color=line.get_color(),
                edgecolors="black",
                zorder=3,
            )
        hedged = [e for e in mine if e.hedges]
        if hedged:  # hedged reads: a ring around the calls a hedge was sent for
            lat_ax.scatter(
                [end(e) for e in hedged],
                [e.duration_ms for e in hedged],
                s=140,
                marker="o",
                facecolors="none",
                edgecolors=line.get_color(),
                zorder=3,
            )
    latencies = [e.duration_ms for e in events if e.duration_ms > 0]
    if latencies and max(latencies) > 50 * min(latencies):
        lat_ax.set_yscale("log")  # a hang and a 1 ms call both stay readable
    for e in events:  # each call as a bar from its start to its answer
        row = tools.index(e.tool)
        out_ax.hlines(row, e.at - t0, end(e), color="lightgray", linewidth=3, zorder=1)
    for status in statuses:
        mine = [e for e in events if e.status == status]
        rows = [tools.index(e.tool) for e in mine]
        marker = "o" if status == "success" else "X"
        out_ax.scatter([end(e) for e in mine], rows, marker=marker, s=60, label=status, zorder=2)
    lat_ax.set_ylabel("latency (ms)")
    lat_ax.set_title(
        "tool calls over time, at the moment each was answered (X: failed; ring: hedged)"
    )
    if tools:
        # Legends beside the axes, never over the data.
        outside = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}
        lat_ax.legend(title="tool", fontsize="small", **outside)
        out_ax.legend(title="outcome", fontsize="small", **outside)
    out_ax.set_yticks(range(len(tools)), tools)
    out_ax.set_ylim(-0.5, len(tools) - 0.5)
    out_ax.set_xlabel("seconds since the first call started (bars: from start to answer)")
    out_ax.set_ylabel("tool")
    return fig
