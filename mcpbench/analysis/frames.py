"""pandas loaders and matplotlib plots over traces and load results (for notebooks and reports).

Loaders go from files to `DataFrame`s; plot functions take a `DataFrame` and
an `Axes` and return the `Axes`, never reading files themselves.
"""

from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from mcpbench.analysis.inspect import summarize

CALL_COLUMNS = ["session", "transport", "ts", "dir", "step", "latency_ms", "outcome", "detail"]


def calls_frame(trace: str | Path) -> pd.DataFrame:
    """One row per request in a trace: when, which step, its latency and outcome.

    Requests are paired with answers by the protocol core's `Session` (via
    `inspect.summarize`); an unanswered request has a NaN latency.
    """
    rows: list[dict[str, Any]] = []
    for session in summarize(trace).sessions:
        for entry in session.calls:
            rows.append(
                {
                    "session": session.id,
                    "transport": session.transport,
                    "ts": pd.Timestamp(entry.ts, unit="s", tz="UTC"),
                    "dir": entry.dir,
                    "step": entry.name,
                    "latency_ms": None if entry.latency is None else entry.latency * 1000,
                    "outcome": entry.outcome,
                    "detail": entry.detail,
                }
            )
    return pd.DataFrame(rows, columns=CALL_COLUMNS).astype({"latency_ms": "float64"})


def samples_frame(samples: str | Path) -> pd.DataFrame:
    """The raw samples of a load run (`samples.jsonl`): one row per step Locust reported."""
    rows = []
    with open(samples, "rb") as handle:
        for line in handle:
            if line.strip():
                row = orjson.loads(line)
                if "step" in row:  # skip the open model's per-process counters
                    rows.append(row)
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame["t"] = pd.to_datetime(frame["t"], unit="s", utc=True)
    return frame


def latency_table(frame: pd.DataFrame, by: str = "step", column: str = "latency_ms") -> pd.DataFrame:
    """Count and p50/p90/p99/max of `column` per `by` group."""
    grouped = frame.dropna(subset=[column]).groupby(by)[column]
    table = grouped.describe(percentiles=[0.5, 0.9, 0.99])[["count", "50%", "90%", "99%", "max"]]
    return table.rename(columns={"50%": "p50", "90%": "p90", "99%": "p99"}).sort_values("p50")


def plot_latency(frame: pd.DataFrame, ax: Any, by: str = "step", column: str = "latency_ms") -> Any:
    """Horizontal box plot of latency per group, in ms, on `ax`."""
    data = frame.dropna(subset=[column])
    groups = sorted(data[by].unique(), key=lambda g: data.loc[data[by] == g, column].median())
    ax.boxplot([data.loc[data[by] == g, column] for g in groups], orientation="horizontal", showfliers=False)
    ax.set_yticks(range(1, len(groups) + 1), groups)
    ax.set_xlabel(f"{column.replace('_ms', '')} (ms)")
    ax.set_xscale("log")
    return ax
