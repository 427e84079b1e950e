"""The chart of a capacity run: each step's rate against its latency percentiles and its errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcpbench.files.outputs import atomic_path

LINES = (("p50", "#4c72b0"), ("p95", "#dd8452"), ("p99", "#c44e52"))


def plot_capacity(result: dict[str, Any], ax: Any) -> Any:
    """Latency percentiles (log scale) and the error ratio (right axis, bars) per ramp step; the SLO's
    bound, the knee, the break and the recovery step marked. Returns the axes."""
    ramp = [r for r in result["steps"] if r["phase"] == "ramp"]
    # One point a rate: the step that decided it (its retry when it broke once); the step it retried, a cross.
    last = {r.get("rung", r["index"]): r for r in ramp}
    steps = list(last.values())
    retried = [r for r in ramp if r is not last[r.get("rung", r["index"])]]
    rates = [r["rate"] for r in steps]
    for name, color in LINES:
        points = [(r["rate"], r[name]) for r in steps if r.get(name) is not None]
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], "o-", color=color, label=name)
        again = [(r["rate"], r[name]) for r in retried if r.get(name) is not None]
        if again:
            ax.plot([p[0] for p in again], [p[1] for p in again], "x", color=color, label=f"{name}, the step retried")
    for text in result["slo"]:
        bound = _bound_ms(text)
        if bound is not None:
            ax.axhline(bound, color="#555555", linestyle="--", linewidth=1, label=f"SLO {text}")
    if (knee := result.get("knee")) is not None:
        ax.axvline(knee["rate"], color="#55a868", linestyle=":", linewidth=1.5, label=f"knee {knee['rate']:g}/s")
    if (brk := result.get("break")) is not None:
        ax.axvline(brk["rate"], color="#c44e52", linestyle="-", linewidth=1, alpha=0.5, label=f"break {brk['rate']:g}/s")
    low = next((r for r in result["steps"] if r["phase"] == "recovery"), None)
    if low is not None and low.get("p95") is not None:
        rec = result.get("recovery") or {}
        said = f"recovered in {rec['seconds']:g} s" if rec.get("recovered") else "not recovered"
        ax.plot([low["rate"]], [low["p95"]], "D", color="#8172b3", label=f"after the break: p95 at {low['rate']:g}/s ({said})")
    ax.set_yscale("log")
    ax.set_xlabel("rate (calls started per second)")
    ax.set_ylabel("latency (ms, from the intended start)")
    errors = ax.twinx()
    width = (max(rates) - min(rates)) / max(1, len(rates)) * 0.4 if len(rates) > 1 else 1.0
    errors.bar(rates, [100 * r["error_ratio"] for r in steps], width=width, color="#937860", alpha=0.3, label="errors")
    errors.set_ylabel("errors (% of calls)")
    errors.set_ylim(0, max(5.0, 110 * max((r["error_ratio"] for r in steps), default=0)))
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = errors.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.1, 1.0))
    capacity = result.get("capacity_rate")
    ax.set_title(f"capacity: {'none held' if capacity is None else f'{capacity:g}/s'} ({', '.join(result['slo'])})", fontsize=10)
    return ax


def _bound_ms(text: str) -> float | None:
    from mcpbench.load.ramp import parse_slo

    try:
        return parse_slo(text).value
    except ValueError:
        return None


def write_chart(result: dict[str, Any], path: Path) -> Path:
    """Draw `plot_capacity` into a PNG at `path` (written whole)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    try:
        plot_capacity(result, ax)
        fig.tight_layout()
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=110)
    finally:
        plt.close(fig)
    return path
