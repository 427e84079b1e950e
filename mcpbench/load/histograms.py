"""A load run's latencies as HDR histograms per step and per chunk of the run (`histograms.json`).

`mcpbench compare` reads these instead of the samples: a million-sample run is a few hundred KB of
histograms, read in milliseconds. The run's time (first to last start) is cut into up to `CHUNKS`
equal slices; each step's successful latencies in a slice are counted in an HDR histogram (the
`hdrhistogram` package: microseconds from 1 µs to an hour, 3 significant figures, so 0.1 %
resolution), stored in the HdrHistogram V2 format (compressed, base64) that other HDR tools read,
with the slice's calls and failures::

    {"schema": 1, "unit": "us", "slice_s": 1.5, "steps": [
      {"type": "streamable-http", "step": "tools/call echo", "counts": [456, …], "failures": [0, …],
       "chunks": ["HISTFAAAA…", …]}, …]}

Keeping the slices (not one histogram per step) lets a comparison's bootstrap resample stretches
of the run, so drift within a run shows in its intervals, and lets it leave out a warm-up
(`compare --trim`). Nothing here imports Locust.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
from hdrh.histogram import HdrHistogram

from mcpbench.outputs import write_atomic

FILE = "histograms.json"
SCHEMA = 1
# Microseconds from 1 µs to an hour, 3 significant figures: 0.1 % resolution over the whole range.
LOWEST_US, HIGHEST_US, FIGURES = 1, 3_600_000_000, 3
# Up to this many time slices a run is cut into: enough for a bootstrap over slices to see drift,
# few enough that each holds a fair share of the tail.
CHUNKS = 20
# ... and at least this many samples a slice on average (a shorter run gets fewer slices).
MIN_CHUNK_SAMPLES = 10
# Lines decoded per batch (bytes): a batch's dicts stay a few tens of MB.
READ_BATCH = 8 << 20

Key = tuple[str, str]  # (request type, step)


@dataclass
class StepRun:
    """One step in one run, per time slice: the bucket counts of its successful latencies, its calls and failures."""

    chunks: np.ndarray  # (slices, buckets) counts of successful latencies, in the HDR layout
    counts: np.ndarray  # (slices,) every call of the step, failed ones too
    fails: np.ndarray  # (slices,)
    slice_s: float = 0.0  # each slice's length (0: unknown, one slice)

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    @property
    def failures(self) -> int:
        return int(self.fails.sum())

    def trimmed(self, seconds: float) -> "StepRun":
        """Without the slices that start in the run's first `seconds` or end in its last (warm-up, wind-down)."""
        if seconds <= 0 or self.slice_s <= 0:
            return self
        cut = math.ceil(seconds / self.slice_s - 1e-9)
        keep = slice(cut, max(cut, len(self.counts) - cut))
        return StepRun(self.chunks[keep], self.counts[keep], self.fails[keep], self.slice_s)


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, FIGURES)


def counts_of(hist: HdrHistogram) -> np.ndarray:
    """The histogram's bucket counts as a numpy view (no copy)."""
    return np.ctypeslib.as_array(hist.counts)


def histogram(counts: np.ndarray) -> HdrHistogram:
    """Bucket counts (the HDR layout) as an HdrHistogram (`encode()`: V2, compressed, base64)."""
    hist = new_histogram()
    used = np.flatnonzero(counts)
    if len(used):
        counts_of(hist)[:] = counts
        hist.set_internal_tacking_values(int(used[0]), int(used[-1]), int(counts.sum()))  # sic: the library's name
    return hist


def slice_counts(micros: np.ndarray, where: np.ndarray, slices: int, layout: HdrHistogram) -> np.ndarray:
    """Latencies (µs) counted per slice (`where`: each one's slice) in `layout`'s buckets: (slices, buckets)."""
    size = layout.counts_len
    if not len(micros):
        return np.zeros((slices, size), dtype=np.int64)
    values, inverse = np.unique(micros, return_inverse=True)
    # The library's bucket of each distinct value (a few thousand), then numpy for every sample.
    index = np.fromiter((layout.get_counts_array_index(int(v)) for v in values), dtype=np.int64, count=len(values))
    return np.bincount(where * size + index[inverse], minlength=slices * size).reshape(slices, size)


def from_samples(path: Path) -> dict[Key, StepRun]:
    """A samples.jsonl's steps, sliced in time (see the module docstring).

    Lines are decoded a batch at a time and their fields taken by comprehensions: the per-sample
    Python work is what bounds a million-sample read (about a second on an idle core).

    Raises:
        OSError: the file cannot be read.
    """
    keys: dict[Key, int] = {}
    codes: list[int] = []
    latencies: list[float] = []
    failed: list[bool] = []
    starts: list[float] = []
    with open(path, "rb") as handle:
        while lines := handle.readlines(READ_BATCH):
            rows = [row for row in map(_decode, lines) if isinstance(row, dict) and "step" in row
                    and isinstance(row.get("latency_ms"), int | float)]  # not the open model's counters, reconnects
            codes += [keys.setdefault((str(row.get("type") or ""), str(row["step"])), len(keys)) for row in rows]
            latencies += [row["latency_ms"] for row in rows]
            failed += [bool(row.get("failure")) for row in rows]
            starts += [row.get("t") if isinstance(row.get("t"), int | float) else math.nan for row in rows]
    code = np.asarray(codes, dtype=np.int64)
    micros = np.clip(np.rint(np.asarray(latencies, dtype=np.float64) * 1000.0), 0, HIGHEST_US).astype(np.int64)
    bad = np.asarray(failed, dtype=bool)
    where, slices, width = _slices(np.asarray(starts, dtype=np.float64))
    layout = new_histogram()
    out = {}
    for key, number in keys.items():
        mine = code == number
        ok = mine & ~bad
        out[key] = StepRun(slice_counts(micros[ok], where[ok], slices, layout),
                           np.bincount(where[mine], minlength=slices), np.bincount(where[mine & bad], minlength=slices), width)
    return out


def _slices(starts: np.ndarray) -> tuple[np.ndarray, int, float]:
    """Each sample's time slice, how many slices, and their length (s); samples without a start time: in their order."""
    count = len(starts)
    slices = max(1, min(CHUNKS, count // MIN_CHUNK_SAMPLES))
    if not count:
        return np.zeros(0, dtype=np.int64), 1, 0.0
    if np.isnan(starts).any():
        return (np.arange(count, dtype=np.int64) * slices) // count, slices, 0.0
    first, span = float(starts.min()), float(starts.max() - starts.min())
    if span <= 0:
        return np.zeros(count, dtype=np.int64), 1, 0.0
    where = np.minimum(((starts - first) / span * slices).astype(np.int64), slices - 1)
    return where, slices, span / slices


def _decode(line: bytes) -> object:
    """One line's JSON, or None for a torn last line (a process killed mid-write), as `samples.records` skips it."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def write(folder: Path, samples: Path | None = None) -> Path:
    """Write `folder`/histograms.json from the run's samples (`samples`, default `folder`/samples.jsonl).

    Raises:
        OSError: the samples cannot be read or the file written.
    """
    steps = from_samples(samples or folder / "samples.jsonl")
    rows = [{"type": kind, "step": step, "counts": run.counts.tolist(), "failures": run.fails.tolist(),
             "chunks": [histogram(chunk).encode().decode("ascii") for chunk in run.chunks]}
            for (kind, step), run in steps.items()]
    width = next((run.slice_s for run in steps.values()), 0.0)
    path = folder / FILE
    write_atomic(path, orjson.dumps({"schema": SCHEMA, "unit": "us", "slice_s": width, "steps": rows}))
    return path


def read(folder: Path) -> dict[Key, StepRun] | None:
    """The run's histograms.json, or None when there is none, it is older than the samples, or not of this schema."""
    path, samples = folder / FILE, folder / "samples.jsonl"
    try:
        if samples.exists() and path.stat().st_mtime < samples.stat().st_mtime:
            return None  # the samples were written again since
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return None
    out = {}
    try:
        width = float(data.get("slice_s") or 0.0)
        for row in data["steps"]:
            chunks = np.stack([counts_of(HdrHistogram.decode(text)).astype(np.int64) for text in row["chunks"]])
            counts, fails = np.asarray(row["counts"], dtype=np.int64), np.asarray(row["failures"], dtype=np.int64)
            if not len(chunks) == len(counts) == len(fails):
                return None
            out[(str(row["type"]), str(row["step"]))] = StepRun(chunks, counts, fails, width)
    except (KeyError, TypeError, ValueError):
        return None  # damaged: the samples decide
    return out
