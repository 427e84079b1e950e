"""What every benchmark shares: machine facts, writing JSON and a chart (percentiles: analysis.stats)."""

import os
import platform
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import orjson

from mcpbench.outputs import atomic_path, write_atomic

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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    bars = ax.bar(range(len(values)), values, color="#4c72b0")
    # Whole numbers with separators from 100 up ("1,462", not "1.46e+03"); long names on two lines.
    ax.bar_label(bars, labels=[f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}" for v in values])
    ax.set_xticks(range(len(labels)), [textwrap.fill(label, 14) for label in labels], fontsize=8)
    ax.set_title(textwrap.fill(title, 70), fontsize=10)
    ax.margins(y=0.12)  # room above the tallest bar for its label
    ax.set_ylabel(unit)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path
