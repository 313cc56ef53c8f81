"""Plots of call events over time (matplotlib is an optional import)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._errors import UsageError
from ._stats import CallEvent


def plot_events(events: Sequence[CallEvent], *, ax: Sequence[Any] | None = None) -> Any:
    """Draw latency (top) and outcomes (bottom) of `events` over time, per tool."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise UsageError("plot() needs matplotlib: pip install matplotlib") from exc
    if ax is None:
        fig, (lat_ax, out_ax) = plt.subplots(2, 1, sharex=True, figsize=(8, 5))
    else:
        lat_ax, out_ax = ax
        fig = lat_ax.figure
    t0 = min((e.at for e in events), default=0.0)
    tools = sorted({e.tool for e in events})
    statuses = sorted({e.status for e in events}, key=lambda s: (s != "success", s))
    for tool in tools:
        mine = [e for e in events if e.tool == tool]
        lat_ax.plot([e.at - t0 for e in mine], [e.duration_ms for e in mine], "o-", label=tool)
    for status in statuses:
        mine = [e for e in events if e.status == status]
        rows = [tools.index(e.tool) for e in mine]
        marker = "o" if status == "success" else "x"
        out_ax.scatter([e.at - t0 for e in mine], rows, marker=marker, label=status)
    lat_ax.set_ylabel("latency (ms)")
    lat_ax.set_title("tool calls over time")
    if tools:
        lat_ax.legend(loc="upper left", fontsize="small")
        out_ax.legend(loc="upper left", fontsize="small")
    out_ax.set_yticks(range(len(tools)), tools)
    out_ax.set_xlabel("seconds since first call")
    out_ax.set_ylabel("outcome")
    return fig
