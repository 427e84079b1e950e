"""Charts over the loaders' frames: each takes a frame and a matplotlib `Axes` and returns the `Axes`.

Every chart sets a title, axis labels with units and a legend when it draws
more than one series, so it reads without the code. Nothing here opens files.
"""

from typing import Any

import matplotlib.dates as mdates
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd

FAILED_STATUSES = ("changed", "missing", "extra", "failed")


def _groups(frame: pd.DataFrame, by: list[str]) -> list[tuple[str, pd.DataFrame]]:
    present = [c for c in by if c in frame]
    if not present:
        return [("all", frame)]
    out = []
    for key, part in frame.groupby(present, observed=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        out.append((" / ".join("?" if pd.isna(k) else str(k) for k in key), part))
    return out


def plot_latency(frame: pd.DataFrame, ax: Any, by: str = "step", column: str = "latency_ms") -> Any:
    """Horizontal box plot of latency (ms, log scale) per group, fastest at the bottom."""
    data = frame.dropna(subset=[column])
    groups = sorted(data[by].dropna().unique(), key=lambda g: data.loc[data[by] == g, column].median())
    ax.boxplot([data.loc[data[by] == g, column] for g in groups], orientation="horizontal", showfliers=False)
    ax.set_yticks(range(1, len(groups) + 1), [str(g) for g in groups])
    ax.set_xlabel(f"{column.replace('_ms', '')} (ms)")
    ax.set_xscale("log")
    ax.set_title(f"latency per {by}")
    return ax


def plot_latency_over_time(frame: pd.DataFrame, ax: Any, time: str = "start", by: tuple[str, ...] = ("transport", "era"), column: str = "latency_ms") -> Any:
    """Each call's latency (ms, log scale) at its start time, one colour per group."""
    data = frame.dropna(subset=[column])
    for label, part in _groups(data, list(by)):
        ax.plot(part[time], part[column], marker=".", linestyle="none", markersize=3, alpha=0.6, label=label)
    ax.set_yscale("log")
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel("latency (ms)")
    ax.set_title("latency over time")
    ax.legend(title=" / ".join(by), fontsize=8, loc="upper right")
    return ax


def plot_latency_cdf(frame: pd.DataFrame, ax: Any, by: tuple[str, ...] = ("transport", "era"), column: str = "latency_ms") -> Any:
    """The share of calls at or under each latency (ms, log scale), one line per group."""
    data = frame.dropna(subset=[column])
    for label, part in _groups(data, list(by)):
        values = np.sort(part[column].to_numpy(dtype="float64"))
        if len(values):
            ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=f"{label} (n={len(values)})")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("share of calls at or under")
    ax.set_title("latency CDF")
    ax.legend(title=" / ".join(by), fontsize=8, loc="lower right")
    return ax


def plot_sticky(sticky: pd.DataFrame, ax: Any) -> Any:
    """Failed sessions (% of sessions) per mode, one bar per routing policy and balancer."""
    data = sticky.assign(
        failed_pct=100.0 * sticky["failed_sessions"] / sticky["sessions"].where(sticky["sessions"] > 0),
        route=sticky["policy"].astype(str) + " / " + sticky["balancer"].astype(str),
    )
    table = data.pivot_table(index="mode", columns="route", values="failed_pct", aggfunc="mean", observed=True).fillna(0.0)
    width = 0.8 / max(len(table.columns), 1)
    positions = np.arange(len(table.index))
    for i, route in enumerate(table.columns):
        bars = ax.bar(positions + i * width, table[route], width, label=route)
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(positions + width * (len(table.columns) - 1) / 2, [str(m) for m in table.index])
    ax.set_xlabel("mode")
    ax.set_ylabel("failed sessions (%)")
    ax.set_ylim(0, 105)
    instances = ", ".join(str(n) for n in sorted(sticky["instances"].unique()))
    ax.set_title(f"sticky sessions: failed sessions behind a balancer ({instances} instances)")
    ax.legend(title="policy / balancer", fontsize=8)
    return ax


def plot_replay_changes(calls: pd.DataFrame, ax: Any, title: str = "replay: calls per step by status") -> Any:
    """Replayed calls per step, stacked by status (identical, changed, missing, extra, failed, …)."""
    table = calls.groupby(["step", "status"], observed=True).size().unstack(fill_value=0)
    order = [s for s in ("identical", *FAILED_STATUSES, "skipped", "unanswered") if s in table.columns]
    table = table[order]
    colors = {"identical": "#55a868", "changed": "#c44e52", "missing": "#8172b2", "extra": "#ccb974", "failed": "#64b5cd", "skipped": "#bbbbbb", "unanswered": "#dddddd"}
    left = np.zeros(len(table))
    for status in order:
        ax.barh([str(s) for s in table.index], table[status], left=left, color=colors.get(status), label=status)
        left += table[status].to_numpy()
    ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))  # calls come whole
    ax.set_xlabel("calls")
    ax.set_ylabel("step")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    return ax


# Width of the timeline's bins (s): fine enough to see a cut, coarse enough to count a few calls.
TIMELINE_BIN = 1.0
FAULT_COLOURS = {"cut-stream": "tab:red", "cut-idle": "tab:red", "restart": "black", "kill": "tab:red", "drop": "tab:orange"}


def reconnect_timeline(run: Any, policy: str, ax: Any) -> Any:
    """Calls succeeding and failing per second over time for one policy (all its cells), with the
    injected faults (vertical lines) and the breaks it recovered from (dots at the recovery)."""
    calls = run.calls[run.calls["policy"].astype(str) == policy]
    if calls.empty:
        ax.set_title(f"{policy}: no calls")
        return ax
    edges = np.arange(0.0, calls["end"].max() + 2 * TIMELINE_BIN, TIMELINE_BIN)
    for ok, label, colour in ((True, "calls ok", "tab:green"), (False, "calls failed", "tab:red")):
        counts, _ = np.histogram(calls.loc[calls["ok"] == ok, "end"], bins=edges)  # counted when they ended
        ax.step(edges[:-1], counts / TIMELINE_BIN, where="post", color=colour, label=label)
    faults = run.faults[run.faults["policy"].astype(str) == policy]
    for kind, part in faults.groupby("kind", observed=True):
        colour = FAULT_COLOURS.get(str(kind), "tab:purple")
        for index, t in enumerate(part["t"]):
            ax.axvline(t, color=colour, alpha=0.25, linewidth=1, label=f"fault: {kind}" if index == 0 else None)
    breaks = run.breaks[(run.breaks["policy"].astype(str) == policy) & (run.breaks["ok"] == True)]  # noqa: E712 - a column
    if not breaks.empty:
        ax.plot(breaks["t"] + breaks["recover_ms"].astype(float) / 1000.0, np.full(len(breaks), 0.95), "v",
                color="tab:blue", markersize=6, transform=ax.get_xaxis_transform(), label="recovered")
    ax.set_ylabel("calls ended per s")
    ax.set_xlabel("time since the cell's first call (s)")
    ax.set_title(f"policy {policy}: calls over time, faults and recoveries")
    ax.legend(loc="upper right", fontsize="small", ncols=2)
    return ax


def recovery_times(run: Any, ax: Any) -> Any:
    """Time to recover (break → next successful answer, ms, log scale) per policy and fault: a box each."""
    breaks = run.breaks.dropna(subset=["recover_ms"])
    groups = [(f"{policy} / {fault}", part["recover_ms"].astype(float))
              for (policy, fault), part in breaks.groupby(["policy", "fault"], observed=True) if len(part)]
    if not groups:
        ax.set_title("time to recover: no break recovered")
        return ax
    boxes = ax.boxplot([values for _, values in groups], orientation="horizontal", showfliers=True)
    ax.set_yticks(range(1, len(groups) + 1), [label for label, _ in groups])
    # a box plot's parts, named: a reader need not know the convention
    ax.legend([boxes["boxes"][0], boxes["medians"][0], boxes["whiskers"][0], boxes["fliers"][0]],
              ["middle half of the breaks", "median", "range (up to 1.5 × the box)", "outlier"], fontsize=7, loc="upper right")
    ax.set_xscale("log")
    # 1, 2, 3, 5 and 7 times each power of ten: recoveries often span less than a decade
    ax.xaxis.set_major_locator(mticker.LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0, 7.0)))
    ax.xaxis.set_major_formatter(mticker.ScalarFormatter())
    ax.xaxis.set_minor_formatter(mticker.NullFormatter())
    ax.set_xlabel("time to recover (ms): break to the next successful answer")
    ax.set_ylabel("policy / fault")
    ax.set_title("time to recover per reconnect policy")
    return ax
