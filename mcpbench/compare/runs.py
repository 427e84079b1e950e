"""Load run folders (`mcpbench load --out DIR`) read into per-step HDR histograms, one per chunk of each run.

A run's samples are in time order (the runner merges them so); each step's successful latencies are
cut into up to `CHUNKS` consecutive chunks, and each chunk is counted in an HDR histogram (the
`hdrhistogram` package's bucket layout, 3 significant figures, microseconds). The bootstrap in
`stats.py` resamples these chunks, so slow drift within a run (a machine busy for a few seconds)
widens the intervals instead of passing for a change.

A side is one run folder or several (repeated runs); a folder holding run folders one level down is
the set of them.
"""

import glob
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
from hdrh.histogram import HdrHistogram

from mcpbench.load.samples import records
from mcpbench.protocol.errors import McpbenchError

# Microseconds from 1 µs to an hour, 3 significant figures: 0.1 % resolution over the whole range.
LOWEST_US, HIGHEST_US, FIGURES = 1, 3_600_000_000, 3
# Up to this many chunks a step's samples are cut into per run: enough for a bootstrap over
# chunks to see drift, few enough that each chunk holds a fair share of the tail.
CHUNKS = 20
# ... and at least this many samples in each chunk (a step with fewer samples gets fewer chunks).
MIN_CHUNK_SAMPLES = 10


class CompareError(McpbenchError):
    """Input a comparison cannot use (a folder that is not a load run, too few samples): exit 2."""


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, FIGURES)


@dataclass
class StepRun:
    """One step in one run: its chunks' bucket counts and its outcome counts."""

    chunks: np.ndarray  # (chunks, buckets) counts of successful latencies, in the HDR layout
    count: int  # every sample of the step, failed ones too
    failures: int


@dataclass
class Side:
    """One side of a comparison: its run folders and, per (type, step), one StepRun per run holding it."""

    folders: list[Path]
    scenarios: list[str]
    steps: dict[tuple[str, str], list[StepRun]] = field(default_factory=dict)

    def merged(self, key: tuple[str, str]) -> np.ndarray:
        """The step's bucket counts over every chunk of every run."""
        return sum(run.chunks.sum(axis=0) for run in self.steps[key])

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


def read_side(paths: list[str]) -> Side:
    """Every run the paths name, read (`expand`)."""
    folders = expand(paths)
    side = Side(folders, [scenario_name(folder) for folder in folders])
    layout = new_histogram()
    for folder in folders:
        for key, run in read_run(folder, layout).items():
            side.steps.setdefault(key, []).append(run)
    return side


def scenario_name(folder: Path) -> str:
    """The run's scenario name (scenario.json, which `mcpbench load` writes), or "" when unknown."""
    try:
        return str(orjson.loads((folder / "scenario.json").read_bytes()).get("name") or "")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return ""


def read_run(folder: Path, layout: HdrHistogram) -> dict[tuple[str, str], StepRun]:
    """A run's steps: each one's latency chunks in `layout`'s buckets and its counts."""
    keys: dict[tuple[str, str], int] = {}
    codes: list[int] = []
    latencies: list[float] = []
    failed: list[bool] = []
    try:
        for record in records(folder / "samples.jsonl"):
            step, latency = record.get("step"), record.get("latency_ms")
            if step is None or not isinstance(latency, int | float):
                continue  # the open model's counters, reconnect records
            codes.append(keys.setdefault((str(record.get("type") or ""), str(step)), len(keys)))
            latencies.append(latency)
            failed.append(bool(record.get("failure")))
    except OSError as exc:
        raise CompareError(f"{folder / 'samples.jsonl'}: cannot read: {exc.strerror or exc}") from None
    code = np.asarray(codes, dtype=np.int64)
    micros = np.clip(np.rint(np.asarray(latencies, dtype=np.float64) * 1000.0), 0, HIGHEST_US).astype(np.int64)
    bad = np.asarray(failed, dtype=bool)
    out = {}
    for key, number in keys.items():
        mine = code == number
        ok = micros[mine & ~bad]
        out[key] = StepRun(chunk_counts(ok, layout), int(mine.sum()), int((mine & bad).sum()))
    return out


def chunk_counts(micros: np.ndarray, layout: HdrHistogram) -> np.ndarray:
    """Latencies (µs, in time order) cut into consecutive chunks, each counted in `layout`'s buckets."""
    chunks = max(1, min(CHUNKS, len(micros) // MIN_CHUNK_SAMPLES))
    size = layout.counts_len
    if not len(micros):
        return np.zeros((1, size), dtype=np.int64)
    values, inverse = np.unique(micros, return_inverse=True)
    # The library's bucket of each distinct value (a few thousand), then numpy for every sample.
    index = np.fromiter((layout.get_counts_array_index(int(v)) for v in values), dtype=np.int64, count=len(values))
    chunk = (np.arange(len(micros), dtype=np.int64) * chunks) // len(micros)
    return np.bincount(chunk * size + index[inverse], minlength=chunks * size).reshape(chunks, size)


def histogram(counts: np.ndarray) -> HdrHistogram:
    """Bucket counts (the HDR layout) as an HdrHistogram: what the JSON keeps (`encode()`, V2 base64)."""
    hist = new_histogram()
    for index in np.flatnonzero(counts):
        hist.record_value(hist.get_value_from_index(int(index)), int(counts[index]))
    return hist


def bucket_values(indices: np.ndarray, layout: HdrHistogram | None = None) -> np.ndarray:
    """The middle of each bucket (ms): the value a quantile falling in it takes."""
    layout = layout or new_histogram()
    out = np.empty(len(indices), dtype=np.float64)
    for i, index in enumerate(indices):
        low = layout.get_value_from_index(int(index))
        high = layout.get_highest_equivalent_value(low)
        out[i] = (low + high) / 2.0 / 1000.0
    return out


def describe(folders: list[Path]) -> str:
    """The folders of a side, short: one name, or the first and how many."""
    if len(folders) == 1:
        return str(folders[0])
    return f"{folders[0]} and {len(folders) - 1} more"


