"""The comparison's chart: per step, the two sides' latency distributions overlaid, and the changes
of p50, p95 and p99 with their intervals. Each plot function takes an `Axes` and returns it and reads
only the comparison's JSON (`judge.to_json`), so `mcpbench report` draws the same from a compare.json.
"""

from typing import Any

import matplotlib.ticker as mticker
import numpy as np
from hdrh.histogram import HdrHistogram

from mcpbench.compare.runs import bucket_values
from mcpbench.load.histograms import counts_of

# A chart with more steps than this shows the slowest-judged first and says how many it left out.
MAX_STEPS = 8
COLOURS = {"base": "#4c72b0", "new": "#dd8452"}
VERDICT_COLOURS = {"slower": "#c44e52", "faster": "#55a868"}
NOISE_COLOUR = "#8c8c8c"
# The percentile axis runs to 99.99 % (a "nines" scale: 0, 90, 99, 99.9, 99.99).
MAX_NINES = 4


def distribution(encoded: str) -> tuple[np.ndarray, np.ndarray]:
    """(nines, ms) of an encoded HDR histogram: for each bucket, -log10 of the share of samples above it, and its value."""
    hist = HdrHistogram.decode(encoded)
    counts = counts_of(hist)
    used = np.flatnonzero(counts)
    cum = np.cumsum(counts[used].astype(np.float64))
    above = 1.0 - cum / cum[-1] if len(cum) else cum
    nines = -np.log10(np.clip(above, 10.0 ** -MAX_NINES, 1.0))
    return nines, bucket_values(used, hist)


def plot_distributions(step: dict[str, Any], ax: Any) -> Any:
    """Latency (ms) at each percentile, base and new overlaid (HDR's percentile distribution)."""
    for side in ("base", "new"):
        if encoded := step["hdr"].get(side):
            nines, values = distribution(encoded)
            ax.step(nines, values, where="post", color=COLOURS[side], label=f"{side} ({step[side]['ok']} ok)")
    ticks = list(range(MAX_NINES + 1))
    ax.set_xticks(ticks, ["0%", "90%", "99%", "99.9%", "99.99%"][: len(ticks)])
    ax.set_xlim(0, MAX_NINES)
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (ms)")
    ax.set_yscale("log")
    plain = mticker.FuncFormatter(lambda v, _: f"{v:g}")  # 40, not 4x10^1
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_locator(mticker.LogLocator(subs=(2.0, 5.0)))  # 2, 5, 20, 50: labelled without crowding
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_title(f"{step['step']}: {step['verdict']}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return ax


def plot_changes(step: dict[str, Any], ax: Any, confidence: float, min_change: float) -> Any:
    """Each quantile's change (% of the base) with its interval, coloured by its verdict."""
    names = list(step["quantiles"])
    for row, name in enumerate(names):
        q = step["quantiles"][name]
        rel = q["rel"]
        if rel["value"] is None or q["verdict"] == "too few samples":
            ax.text(0, row, f"{name}: too few", va="center", ha="center", fontsize=8, color=NOISE_COLOUR)
            continue
        value, low, high = (100.0 * rel[k] for k in ("value", "low", "high"))
        colour = VERDICT_COLOURS.get(q["verdict"], NOISE_COLOUR)
        ax.errorbar(value, row, xerr=[[max(0.0, value - low)], [max(0.0, high - value)]], fmt="o", color=colour, capsize=4)
        ax.annotate(f"{value:+.1f}%", (value, row), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.axvspan(-100 * min_change, 100 * min_change, color=NOISE_COLOUR, alpha=0.15, label=f"±{min_change:.0%} (within noise)")
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(-0.7, len(names) - 0.3)
    ax.set_xlabel(f"new vs base (%), {confidence:.0%} interval")
    ax.set_title("change", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    if ax.get_xlim()[1] - ax.get_xlim()[0] < 10:
        centre = sum(ax.get_xlim()) / 2
        ax.set_xlim(centre - 5, centre + 5)
    return ax


def draw(data: dict[str, Any], path: Any) -> int:
    """The whole chart of a comparison's JSON into `path` (PNG); returns how many steps it shows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mcpbench.files.outputs import atomic_path

    order = {"slower": 0, "faster": 1, "within noise": 2}
    steps = sorted((s for s in data["steps"] if s["verdict"] in order), key=lambda s: order[s["verdict"]])
    shown = steps[:MAX_STEPS]
    rows = max(1, len(shown))
    fig, axes = plt.subplots(rows, 2, figsize=(11, 2.9 * rows), squeeze=False, gridspec_kw={"width_ratios": [1.6, 1]})
    for (left, right), step in zip(axes, shown):
        plot_distributions(step, left)
        plot_changes(step, right, data["confidence"], data["min_change"])
    if not shown:
        axes[0][0].text(0.5, 0.5, "no step with enough samples to judge", ha="center", va="center")
    title = f"compare: {_side(data['base'])} (base) vs {_side(data['new'])} (new)"
    if len(steps) > len(shown):
        title += f" ({len(steps) - len(shown)} more steps not shown)"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return len(shown)


def _side(side: dict[str, Any]) -> str:
    folders = side["folders"]
    name = folders[0].rstrip("/").rsplit("/", 1)[-1] if folders else "?"
    return name if len(folders) == 1 else f"{name} and {len(folders) - 1} more"


def headline(data: dict[str, Any]) -> str:
    """One line: how many steps were slower, faster, within noise, too few; and whether it failed."""
    counts: dict[str, int] = {}
    for step in data["steps"]:
        counts[step["verdict"]] = counts.get(step["verdict"], 0) + 1
    parts = [f"{counts[k]} {k}" for k in ("slower", "faster", "within noise", "too few samples") if counts.get(k)]
    failed = sum(1 for s in data["steps"] if s["failed"])
    verdict = f", {failed} failing --fail-on" if failed else ""
    inconclusive = sum(1 for s in data["steps"] if s.get("inconclusive"))
    verdict += f", {inconclusive} inconclusive --fail-on (one run a side)" if inconclusive else ""
    return f"{_side(data['base'])} vs {_side(data['new'])}: {', '.join(parts) or 'no step in common'}{verdict}"


