"""A load run's latencies as HDR histograms per step and per chunk of the run (`histograms.json`).

`mcpbench compare` reads these instead of the samples: a million-sample run is a few hundred KB of
histograms, read in milliseconds. The run's time (first to last start) is cut into up to `CHUNKS`
equal slices; each step's successful latencies in a slice are counted in an HDR histogram (the
`hdrhistogram` package: microseconds from 1 µs to an hour, 3 significant figures, so 0.1 %
resolution), stored in the HdrHistogram V2 format (compressed, base64) that other HDR tools read,
with the slice's calls and failures::

    {"schema": 1, "unit": "us", "slice_s": 1.5, "start": 1796000000.25, "steps": [
      {"type": "streamable-http", "step": "tools/call echo", "counts": [456, …], "failures": [0, …],
       "chunks": ["HISTFAAAA…", …]}, …]}

`start` is when the first slice begins (the first call's start, seconds since the epoch; absent when
the samples had no times). Keeping the slices (not one histogram per step) lets a comparison judge
stretches of a run as units, so drift within a run shows in its intervals, lay two runs that ran
side by side on one timeline, and leave out a warm-up (`compare --trim`). Nothing here imports Locust.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
from hdrh.histogram import HdrHistogram

from mcpbench.files.outputs import write_atomic

FILE = "histograms.json"
SCHEMA = 1
# Microseconds from 1 µs to an hour, 3 significant figures: 0.1 % resolution over the whole range.
LOWEST_US, HIGHEST_US, FIGURES = 1, 3_600_000_000, 3
# Up to this many time slices a run is cut into: enough to group into stretches that show drift
# (`compare/units.py`), and to lay two runs side by side on one timeline.
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
    start: float = math.nan  # when the first slice begins (epoch seconds; NaN: unknown)

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
        return StepRun(self.chunks[keep], self.counts[keep], self.fails[keep], self.slice_s, self.start + cut * self.slice_s)


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


class Columns:
    """A run's samples as columns (step, latency, failed, start), from which `steps` makes the
    histograms: `from_samples` fills it a batch at a time, and the load's summary (`samples.summarize`)
    one sample at a time in the pass it makes anyway, so a run's samples are read once at its end."""

    def __init__(self) -> None:
        self.keys: dict[Key, int] = {}
        self.codes: list[int] = []
        self.latencies: list[float] = []
        self.failed: list[bool] = []
        self.starts: list[float] = []

    def add(self, kind: str, step: str, latency: float, failed: bool, start: object) -> None:
        self.codes.append(self.keys.setdefault((kind, step), len(self.keys)))
        self.latencies.append(latency)
        self.failed.append(failed)
        self.starts.append(start if isinstance(start, int | float) else math.nan)

    def add_rows(self, rows: list[dict]) -> None:
        """Decoded sample lines (the ones with a step and a latency), by comprehensions: the per-sample
        Python work is what bounds a million-sample read."""
        rows = [row for row in rows if isinstance(row, dict) and "step" in row
                and isinstance(row.get("latency_ms"), int | float)]  # not the open model's counters, reconnects
        keys = self.keys
        self.codes += [keys.setdefault((str(row.get("type") or ""), str(row["step"])), len(keys)) for row in rows]
        self.latencies += [row["latency_ms"] for row in rows]
        self.failed += [bool(row.get("failure")) for row in rows]
        self.starts += [row.get("t") if isinstance(row.get("t"), int | float) else math.nan for row in rows]

    def steps(self) -> dict[Key, StepRun]:
        """Each step's slices (see the module docstring)."""
        code = np.asarray(self.codes, dtype=np.int64)
        micros = np.clip(np.rint(np.asarray(self.latencies, dtype=np.float64) * 1000.0), 0, HIGHEST_US).astype(np.int64)
        bad = np.asarray(self.failed, dtype=bool)
        where, slices, width, first = _slices(np.asarray(self.starts, dtype=np.float64))
        layout = new_histogram()
        out = {}
        for key, number in self.keys.items():
            mine = code == number
            ok = mine & ~bad
            out[key] = StepRun(slice_counts(micros[ok], where[ok], slices, layout),
                               np.bincount(where[mine], minlength=slices), np.bincount(where[mine & bad], minlength=slices), width, first)
        return out


def from_samples(path: Path) -> dict[Key, StepRun]:
    """A samples.jsonl's steps, sliced in time (see the module docstring), its lines decoded a batch at a time.

    Raises:
        OSError: the file cannot be read.
    """
    columns = Columns()
    with open(path, "rb") as handle:
        while lines := handle.readlines(READ_BATCH):
            columns.add_rows(list(map(_decode, lines)))
    return columns.steps()


def _slices(starts: np.ndarray) -> tuple[np.ndarray, int, float, float]:
    """Each sample's time slice, how many slices, their length (s) and when the first begins (NaN:
    unknown); samples without a start time: in their order."""
    count = len(starts)
    slices = max(1, min(CHUNKS, count // MIN_CHUNK_SAMPLES))
    if not count:
        return np.zeros(0, dtype=np.int64), 1, 0.0, math.nan
    if np.isnan(starts).any():
        return (np.arange(count, dtype=np.int64) * slices) // count, slices, 0.0, math.nan
    first, span = float(starts.min()), float(starts.max() - starts.min())
    if span <= 0:
        return np.zeros(count, dtype=np.int64), 1, 0.0, first
    where = np.minimum(((starts - first) / span * slices).astype(np.int64), slices - 1)
    return where, slices, span / slices, first


def _decode(line: bytes) -> object:
    """One line's JSON, or None for a torn last line (a process killed mid-write), as `samples.records` skips it."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def write(folder: Path, steps: dict[Key, StepRun] | None = None) -> Path:
    """Write `folder`/histograms.json: `steps` (`Columns.steps`), or those of `folder`/samples.jsonl.

    Raises:
        OSError: the samples cannot be read or the file written.
    """
    steps = from_samples(folder / "samples.jsonl") if steps is None else steps
    rows = [{"type": kind, "step": step, "counts": run.counts.tolist(), "failures": run.fails.tolist(),
             "chunks": [histogram(chunk).encode().decode("ascii") for chunk in run.chunks]}
            for (kind, step), run in steps.items()]
    width = next((run.slice_s for run in steps.values()), 0.0)
    start = next((run.start for run in steps.values()), math.nan)
    data = {"schema": SCHEMA, "unit": "us", "slice_s": width, **({} if math.isnan(start) else {"start": start}), "steps": rows}
    path = folder / FILE
    write_atomic(path, orjson.dumps(data))
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
        start = float(data["start"]) if isinstance(data.get("start"), int | float) else math.nan
        for row in data["steps"]:
            chunks = np.stack([counts_of(HdrHistogram.decode(text)).astype(np.int64) for text in row["chunks"]])
            counts, fails = np.asarray(row["counts"], dtype=np.int64), np.asarray(row["failures"], dtype=np.int64)
            if not len(chunks) == len(counts) == len(fails):
                return None
            out[(str(row["type"]), str(row["step"]))] = StepRun(chunks, counts, fails, width, start)
    except (KeyError, TypeError, ValueError):
        return None  # damaged: the samples decide
    return out
