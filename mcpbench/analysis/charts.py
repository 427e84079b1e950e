"""Charts over the loaders' frames: each takes a frame and a matplotlib `Axes` and returns the `Axes`.

Every chart sets a title, axis labels with units and a legend when it draws
more than one series, so it reads without the code. Nothing here opens files.
"""

from typing import Any

import matplotlib.dates as mdates
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
    ax.set_xlabel("calls")
    ax.set_ylabel("step")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    return ax
