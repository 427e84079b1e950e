"""What every benchmark shares: machine facts, writing JSON and a chart (percentiles: mcpbench.measures.stats)."""

import os
import platform
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcpbench.files.outputs import atomic_path, write_atomic

BENCH_DIR = Path("results") / "bench"


def machine() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_result(name: str, data: dict[str, Any], out_dir: Path | None = None) -> Path:
    """Write `results/bench/<name>.json` (with machine facts) and return its path."""
    folder = out_dir or BENCH_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    write_atomic(path, orjson.dumps({"benchmark": name, "machine": machine(), **data}, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return path


def bar_chart(path: Path, title: str, labels: list[str], values: list[float], unit: str) -> Path:
    """A simple labelled bar chart saved as PNG (matplotlib imported lazily)."""
    return bar_panels(path, title, [Panel("", labels, values, unit)])


@dataclass(frozen=True, slots=True)
class Panel:
    """One panel of bars: figures that share a unit."""

    title: str
    labels: list[str]
    values: list[float]
    unit: str


def bar_panels(path: Path, title: str, panels: list[Panel]) -> Path:
    """Labelled bar charts side by side, one per unit, saved as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # A panel is as wide as its bars need (0.8 in each, with their labels), and at least 3.6 in.
    widths = [max(3.6, 0.8 * len(panel.values)) for panel in panels]
    size = (max(7, widths[0]) if len(panels) == 1 else sum(widths), 3.5)
    fig, axes = plt.subplots(1, len(panels), figsize=size, squeeze=False, gridspec_kw={"width_ratios": widths})
    for ax, panel, width in zip(axes[0], panels, widths):
        bars = ax.bar(range(len(panel.values)), panel.values, color="#4c72b0")
        # Whole numbers with separators from 100 up ("1,462", not "1.46e+03"); long names on two lines.
        ax.bar_label(bars, labels=[f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}" for v in panel.values], fontsize=8)
        ax.set_xticks(range(len(panel.labels)), [textwrap.fill(label, 14) for label in panel.labels], fontsize=8)
        if panel.title:
            ax.set_title(textwrap.fill(panel.title, max(40, int(11 * width))), fontsize=9)
        ax.margins(y=0.12)  # room above the tallest bar for its label
        ax.set_ylabel(panel.unit)
    fig.suptitle(textwrap.fill(title, 70 if len(panels) == 1 else 110), fontsize=10)
    return save_figure(fig, path)


def save_figure(fig: Any, path: Path, dpi: int = 110) -> Path:
    """Lay out a matplotlib figure, write it to `path` as PNG (atomically) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")
    plt.close(fig)
    return path
