"""Analysis: from traces and load results to summaries, DataFrames and charts.

The loaders are the public API (docs/analysis.md); they import pandas on first
use, so `mcpbench inspect` and the recorders never pay for it.
"""

from importlib import import_module
from typing import Any

_LOADERS = {
    "load_trace": "mcpbench.analysis.traces",
    "TraceFrames": "mcpbench.analysis.traces",
    "load_run": "mcpbench.analysis.results",
    "load_lab": "mcpbench.analysis.results",
    "load_reconnect": "mcpbench.analysis.results",
    "load_replay": "mcpbench.analysis.results",
    "load_samples": "mcpbench.analysis.results",
}

__all__ = list(_LOADERS)


def __getattr__(name: str) -> Any:
    if name in _LOADERS:
        return getattr(import_module(_LOADERS[name]), name)
    raise AttributeError(f"module 'mcpbench.analysis' has no attribute {name!r}")
