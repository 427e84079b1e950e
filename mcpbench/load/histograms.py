"""A load run's latencies as HDR histograms per step and per chunk of the run (`histograms.json`).

`mcpbench compare` reads these instead of the samples: a million-sample run is a few hundred KB of
histograms, read in milliseconds. Each step's successful latencies, in the order of the samples
(the runner merges them by start time), are cut into up to `CHUNKS` consecutive chunks, each
counted in an HDR histogram (the `hdrhistogram` package: microseconds from 1 µs to an hour, 3
significant figures, so 0.1 % resolution) and stored in the HdrHistogram V2 format (compressed,
base64) that other HDR tools read::

    {"schema": 1, "unit": "us", "steps": [
      {"type": "streamable-http", "step": "tools/call echo", "count": 9120, "failures": 3,
       "chunks": ["HISTFAAAA…", …]}, …]}

Keeping the chunks (not one histogram per step) lets a comparison's bootstrap resample stretches
of the run, so drift within a run shows in its intervals. Nothing here imports Locust.
"""

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
# Up to this many chunks a step's samples are cut into per run: enough for a bootstrap over
# chunks to see drift, few enough that each chunk holds a fair share of the tail.
CHUNKS = 20
# ... and at least this many samples in each chunk (a step with fewer samples gets fewer chunks).
MIN_CHUNK_SAMPLES = 10
# Lines decoded per batch (bytes): a batch's dicts stay a few tens of MB.
READ_BATCH = 8 << 20

Key = tuple[str, str]  # (request type, step)


@dataclass
class StepRun:
    """One step in one run: its chunks' bucket counts and its outcome counts."""

    chunks: np.ndarray  # (chunks, buckets) counts of successful latencies, in the HDR layout
    count: int  # every sample of the step, failed ones too
    failures: int


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


def from_samples(path: Path) -> dict[Key, StepRun]:
    """A samples.jsonl's steps: each one's latency chunks and its counts.

    Lines are decoded a batch at a time and their fields taken by comprehensions: the per-sample
    Python work is what bounds a million-sample read (about a second on an idle core).

    Raises:
        OSError: the file cannot be read.
    """
    keys: dict[Key, int] = {}
    codes: list[int] = []
    latencies: list[float] = []
    failed: list[bool] = []
    with open(path, "rb") as handle:
        while lines := handle.readlines(READ_BATCH):
            rows = [row for row in map(_decode, lines) if isinstance(row, dict) and "step" in row
                    and isinstance(row.get("latency_ms"), int | float)]  # not the open model's counters, reconnects
            codes += [keys.setdefault((str(row.get("type") or ""), str(row["step"])), len(keys)) for row in rows]
            latencies += [row["latency_ms"] for row in rows]
            failed += [bool(row.get("failure")) for row in rows]
    code = np.asarray(codes, dtype=np.int64)
    micros = np.clip(np.rint(np.asarray(latencies, dtype=np.float64) * 1000.0), 0, HIGHEST_US).astype(np.int64)
    bad = np.asarray(failed, dtype=bool)
    layout = new_histogram()
    out = {}
    for key, number in keys.items():
        mine = code == number
        out[key] = StepRun(chunk_counts(micros[mine & ~bad], layout), int(mine.sum()), int((mine & bad).sum()))
    return out


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
    rows = [{"type": kind, "step": step, "count": run.count, "failures": run.failures,
             "chunks": [histogram(chunk).encode().decode("ascii") for chunk in run.chunks]}
            for (kind, step), run in steps.items()]
    path = folder / FILE
    write_atomic(path, orjson.dumps({"schema": SCHEMA, "unit": "us", "steps": rows}))
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
        for row in data["steps"]:
            chunks = np.stack([counts_of(HdrHistogram.decode(text)).astype(np.int64) for text in row["chunks"]])
            out[(str(row["type"]), str(row["step"]))] = StepRun(chunks, int(row["count"]), int(row["failures"]))
    except (KeyError, TypeError, ValueError):
        return None  # damaged: the samples decide
    return out
