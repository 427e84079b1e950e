"""Load run folders (`mcpbench load --out DIR`) read into per-step HDR histograms, one per chunk of each run.

The run's histograms.json when it has one (`load/histograms.py`: what `mcpbench load` writes), else
the same made from its samples.jsonl. With one run a side, `units.py` groups the chunks into
stretches of time that `stats.py` judges as units, so slow drift within a run (a machine busy for a
few seconds) widens the intervals instead of passing for a change.

A side is one run folder or several (repeated runs); a folder holding run folders one level down is
the set of them.
"""

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
from hdrh.histogram import HdrHistogram

from mcpbench.load import histograms
from mcpbench.load.histograms import StepRun
from mcpbench.protocol.errors import McpbenchError

# Run folders read at once (one process each), at most the machine's cores.
MAX_READERS = 4


class CompareError(McpbenchError):
    """Input a comparison cannot use (a folder that is not a load run, too few samples): exit 2."""


@dataclass
class Side:
    """One side of a comparison: its run folders and, per (type, step), one StepRun per run holding it."""

    folders: list[Path]
    scenarios: list[str]
    steps: dict[tuple[str, str], list[StepRun]] = field(default_factory=dict)

    def merged(self, key: tuple[str, str]) -> np.ndarray:
        """The step's bucket counts over every chunk of every run."""
        return np.sum([run.chunks.sum(axis=0) for run in self.steps[key]], axis=0)

    def count(self, key: tuple[str, str]) -> tuple[int, int]:
        """(samples, failures) of the step over every run."""
        runs = self.steps[key]
        return sum(r.count for r in runs), sum(r.failures for r in runs)


def expand(paths: list[str]) -> list[Path]:
    """Folders and glob patterns into load run folders, in order, each once.

    A folder that holds no samples.jsonl but run folders one level down stands for those runs.

    Raises:
        CompareError: a pattern matching nothing, or a folder that is not a load run (names it).
    """
    out: list[Path] = []
    for raw in paths:
        matches = sorted(glob.glob(raw)) if glob.has_magic(raw) else [raw]
        if not matches:
            raise CompareError(f"{raw}: matches no folder")
        for match in matches:
            path = Path(match)
            if (path / "samples.jsonl").is_file():
                out.append(path)
                continue
            inner = sorted(p.parent for p in path.glob("*/samples.jsonl")) if path.is_dir() else []
            if not inner:
                what = "no such folder" if not path.exists() else "not a load run (no samples.jsonl)"
                raise CompareError(f"{path}: {what}")
            out += inner
    return list(dict.fromkeys(out))


def read_sides(sides: list[list[str]], trim: float = 0.0) -> list[Side]:
    """Each side's runs, read: their histograms.json, else their samples, parsed in parallel
    processes when there are several and cores for them (JSON decoding: about a second per
    million samples on an idle core). `trim`: seconds left out at each end of every run.
    """
    expanded = [expand(paths) for paths in sides]
    folders = list(dict.fromkeys(f for side in expanded for f in side))
    read: dict[Path, dict | None] = {folder: histograms.read(folder) for folder in folders}
    missing = [folder for folder, steps in read.items() if steps is None]
    workers = min(len(missing), os.cpu_count() or 1, MAX_READERS)
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # fork: the children need nothing but what is already imported.
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            read.update(zip(missing, pool.map(read_run, missing)))
    else:
        read.update((folder, read_run(folder)) for folder in missing)
    out = []
    for side_folders in expanded:
        side = Side(side_folders, [scenario_name(folder) for folder in side_folders])
        for folder in side_folders:
            for key, run in read[folder].items():
                side.steps.setdefault(key, []).append(run.trimmed(trim))
        out.append(side)
    return out


def scenario_name(folder: Path) -> str:
    """The run's scenario name (scenario.json, which `mcpbench load` writes), or "" when unknown."""
    try:
        return str(orjson.loads((folder / "scenario.json").read_bytes()).get("name") or "")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return ""


def read_run(folder: Path) -> dict[tuple[str, str], StepRun]:
    """A run's steps as chunked histograms, from its samples."""
    try:
        return histograms.from_samples(folder / "samples.jsonl")
    except OSError as exc:
        raise CompareError(f"{folder / 'samples.jsonl'}: cannot read: {exc.strerror or exc}") from None


def bucket_values(indices: np.ndarray, layout: HdrHistogram | None = None) -> np.ndarray:
    """The middle of each bucket (ms): the value a quantile falling in it takes."""
    layout = layout or histograms.new_histogram()
    out = np.empty(len(indices), dtype=np.float64)
    for i, index in enumerate(indices):
        low = layout.get_value_from_index(int(index))
        high = layout.get_highest_equivalent_value(low)
        out[i] = (low + high) / 2.0 / 1000.0
    return out
