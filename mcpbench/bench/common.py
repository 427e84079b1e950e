"""What every benchmark shares: machine facts, writing JSON and a chart (percentiles: analysis.stats)."""

import os
import platform
import sys
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
    bars = ax.bar(labels, values, color="#4c72b0")
    ax.bar_label(bars, fmt="%.3g")
    ax.set_title(title)
    ax.set_ylabel(unit)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path
