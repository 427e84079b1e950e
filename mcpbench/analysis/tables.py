"""Summary tables over the loaders' frames: pure functions, frame in, frame out."""

import pandas as pd

PERCENTILES = [0.5, 0.9, 0.99]


def latency_table(frame: pd.DataFrame, by: str | list[str] = "step", column: str = "latency_ms") -> pd.DataFrame:
    """Count and p50/p90/p99/max of `column` per `by` group (groups without a value left out), by p50."""
    data = frame.dropna(subset=[column])
    if data.empty:
        return pd.DataFrame(columns=["count", "p50", "p90", "p99", "max"])
    grouped = data.groupby(by, observed=True)[column]
    table = grouped.describe(percentiles=PERCENTILES)[["count", "50%", "90%", "99%", "max"]]
    table = table.rename(columns={"50%": "p50", "90%": "p90", "99%": "p99"}).sort_values("p50")
    return table.astype({"count": "int64"})


def outcome_table(frame: pd.DataFrame, by: str | list[str] = "step", column: str = "outcome") -> pd.DataFrame:
    """How many rows of each `column` value (outcome, failure class) per `by` group."""
    data = frame.dropna(subset=[column])
    if data.empty:
        return pd.DataFrame()
    return data.groupby(by, observed=True)[column].value_counts().unstack(fill_value=0)
