"""A probe's JSON (`mcpbench probe --json`) for the report: its summary line, its table, and its charts.

A chart is drawn for a check where a picture says more than its row: sessions kept per instance,
the arrival of progress events over a call (buffering), a steady session's latency before and
after a spike of sessions (churn).
"""

from collections.abc import Callable
from pathlib import Path

import orjson
import pandas as pd

VERDICT_ORDER = ("pass", "warn", "fail", "n/a")
COLORS = {"kept": "#55a868", "broken": "#c44e52", "deployment": "#4c72b0", "direct": "#8c8c8c"}


def load_probe(path: Path) -> dict | None:
    """The probe a JSON file holds, or None when it holds something else."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and "probe" in data and isinstance(data.get("checks"), list) else None


def probe_line(probe: dict) -> str:
    """`probe URL: 6 pass, 1 warn, 1 fail, 1 n/a (48.2 s)`."""
    counts = {verdict: 0 for verdict in VERDICT_ORDER}
    for row in probe["checks"]:
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    shown = ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n)
    return f"probe {probe['probe']}: {shown} ({probe.get('seconds', 0):.1f} s)"


def table(probe: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [{"check": r["check"], "verdict": r["verdict"], "evidence": r["evidence"], "fix": r["fix"], "seconds": r["seconds"]}
         for r in probe["checks"]]
    )


def charts(probe: dict) -> list[Callable]:
    """`draw(ax) -> ax` for each check of `probe` that has a chart."""
    out = []
    for row in probe["checks"]:
        figures = row.get("figures") or {}
        if row["check"] == "sessions" and figures.get("per_instance"):
            out.append(lambda ax, f=figures: plot_sessions(f, ax))
        elif row["check"] == "buffering" and (figures.get("deployment") or {}).get("progress_at"):
            out.append(lambda ax, f=figures: plot_arrivals(f, ax))
        elif row["check"] == "churn" and figures.get("before_ms") and figures.get("after_ms"):
            out.append(lambda ax, f=figures: plot_churn(f, ax))
    return out


def plot_sessions(figures: dict, ax):
    """Sessions kept and broken, by the instance that answered their handshake."""
    names = list(figures["per_instance"])
    kept = [figures["per_instance"][n].get("kept", 0) for n in names]
    broken = [figures["per_instance"][n].get("broken", 0) for n in names]
    ax.bar(names, kept, color=COLORS["kept"], label="kept")
    ax.bar(names, broken, bottom=kept, color=COLORS["broken"], label="broken")
    ax.set_xlabel("instance that answered initialize")
    ax.set_ylabel("sessions")
    ax.set_title("Sessions across the deployment: kept and broken per instance")
    ax.legend(loc="upper right", fontsize=8)
    return ax


def plot_arrivals(figures: dict, ax):
    """When each progress event and the answer arrived, through the deployment (and directly, when measured)."""
    runs = [("deployment", figures["deployment"])] + ([("direct", figures["direct"])] if figures.get("direct") else [])
    for y, (name, measured) in enumerate(runs):
        times = measured.get("progress_at") or []
        ax.scatter(times, [y] * len(times), color=COLORS[name], label=f"{name}: progress", s=30)
        if measured.get("answer_at") is not None:
            ax.scatter([measured["answer_at"]], [y], color=COLORS[name], marker="*", s=160, label=f"{name}: answer")
    ax.set_yticks(range(len(runs)), [name for name, _ in runs])
    ax.set_ylim(-0.6, len(runs) - 0.4)
    ax.set_xlabel("seconds after the call was sent")
    ax.set_title(f"Buffering: arrival of the progress events of {figures.get('call', 'the call')}")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return ax


def plot_churn(figures: dict, ax):
    """A steady session's call latency before and after the spike of sessions."""
    before, after = figures["before_ms"], figures["after_ms"]
    ax.plot(range(len(before)), before, "o-", color=COLORS["kept"], label="before the spike")
    ax.plot(range(len(before), len(before) + len(after)), after, "o-", color=COLORS["broken"], label="after the spike")
    ax.axvline(len(before) - 0.5, color="#777", linestyle=":")
    spike = figures.get("spike") or {}
    ax.text(len(before) - 0.4, max(before + after), f" spike: {spike.get('sessions', '?')} sessions", va="top", fontsize=8)
    ax.set_xlabel("call of the steady session")
    ax.set_ylabel("latency (ms)")
    ax.set_title("Session churn: a steady session's latency before and after the spike")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return ax
