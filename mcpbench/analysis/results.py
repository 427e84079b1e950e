"""Loaders for what commands leave behind: load runs, lab runs, replay reports.

Each loader reads files only and returns frames with the columns documented in
docs/analysis.md; none computes a summary of its own (the load run's summary
is the one `mcpbench load` wrote).
"""

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from mcpbench.load.samples import numbered_records, records
from mcpbench.protocol.errors import McpbenchError

SAMPLE_COLUMNS = ["t", "type", "step", "latency_ms", "size", "failure", "ttfe_ms", "uncorrected_ms"]
STICKY_COLUMNS = ["transport", "mode", "policy", "balancer", "instances", "sessions", "calls", "failed_calls", "failed_sessions", "first_instance_share"]
REPLAY_CALL_COLUMNS = ["session", "index", "method", "name", "step", "status", "changes", "latency_ms", "recorded_latency_ms", "detail"]
CHANGE_COLUMNS = ["session", "index", "step", "path", "kind", "old", "new"]


class ResultsError(McpbenchError):
    """A folder or file is not what the loader expects (names it)."""


class DroppedSamples(UserWarning):
    """Samples a loader left out, named by file and line (a start time that is not the run's)."""


# A sample that started further than this from the run's median start is not one of the run's steps
# (a clock not yet set, 0, a time in milliseconds): kept, one such `t` makes a per-second series of
# the run (`resample("1s")`) decades long, gigabytes of empty seconds.
STRAY_SPAN = 7 * 86400.0
# The dropped lines a warning names (then how many more).
NAMED_LINES = 5


@dataclass
class LoadRun:
    """A `mcpbench load` folder: raw samples, the summary and Locust's own statistics."""

    folder: Path
    samples: pd.DataFrame
    summary: dict[str, Any]
    stats: pd.DataFrame  # locust_stats.csv: one row per request type and name, plus Aggregated
    history: pd.DataFrame  # locust_stats_history.csv: one row per second and name
    failures: pd.DataFrame  # locust_failures.csv
    scenario: dict[str, Any] = field(default_factory=dict)


@dataclass
class LabRun:
    """A `mcpbench lab run` folder: sticky-session cells (and reconnect results, when present)."""

    folder: Path
    sticky: pd.DataFrame  # one row per cell (sticky.csv)
    sticky_failures: pd.DataFrame  # tidy: cell, failure class, failed calls and sessions
    reconnect: pd.DataFrame | None = None  # reconnect.csv, when the run made one


@dataclass
class ReconnectRun:
    """A reconnect experiment (`mcpbench lab run scenarios/reconnect.yaml`): its cells and what happened in time.

    Times (`t`) are seconds since the cell's first step, so cells line up: faults were scheduled
    the same way in each.
    """

    folder: Path
    cells: pd.DataFrame  # reconnect.csv: one row per cell
    calls: pd.DataFrame  # transport, fault, policy, client, t (start), end, ok: one row per call (load users and SDK client)
    breaks: pd.DataFrame  # transport, fault, policy, t, noticed, action, ok, recover_ms, lost, duplicated, uncertain, resent
    faults: pd.DataFrame  # transport, fault, policy, t, kind: one row per fault the lab injected


@dataclass
class ReplayReport:
    """The JSON of `mcpbench replay --report` (or `mcpbench diff --report`)."""

    path: Path
    kind: str
    trace: str
    target: str
    exit_code: int
    counts: dict[str, int]
    calls: pd.DataFrame  # one row per recorded call with its status
    changes: pd.DataFrame  # one row per changed path
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


def load_samples(path: str | os.PathLike) -> pd.DataFrame:
    """The raw samples of a load run (`samples.jsonl`): one row per step Locust reported.

    The open model's per-process counter lines are skipped; a torn last line
    (a process killed mid-write) is skipped too. A sample whose start time `t` is missing, not a
    number, or not within `STRAY_SPAN` of the run's is dropped with a `DroppedSamples` warning
    naming its file and line: no guess at when it ran, and no series over time spanning years.
    """
    numbered = [(number, row) for number, row in numbered_records(path) if "step" in row]
    frame = pd.DataFrame([row for _, row in numbered]).reindex(columns=SAMPLE_COLUMNS)
    t = pd.to_numeric(frame["t"], errors="coerce").to_numpy(dtype="float64")
    finite = np.isfinite(t)
    stray = ~finite
    if finite.any():
        stray |= np.abs(t - np.median(t[finite])) > STRAY_SPAN
    if stray.any():
        dropped = np.flatnonzero(stray)  # only the lines the warning names are put in words
        named = [f"line {numbered[i][0]} (t={numbered[i][1].get('t')!r})" for i in dropped[:NAMED_LINES]]
        more = f" and {len(dropped) - NAMED_LINES} more" if len(dropped) > NAMED_LINES else ""
        warnings.warn(f"{path}: {len(dropped)} samples dropped, their start time t is not one of the run's: "
                      f"{', '.join(named)}{more}", DroppedSamples, stacklevel=2)
        frame, t = frame[~stray].reset_index(drop=True), t[~stray]
    frame["t"] = pd.to_datetime(t, unit="s", utc=True)
    for column in ("latency_ms", "ttfe_ms", "uncorrected_ms"):
        frame[column] = frame[column].astype("float64")
    frame["size"] = frame["size"].astype("Int64")
    for column in ("type", "step", "failure"):
        frame[column] = frame[column].astype("category")
    return frame


def load_run(folder: str | os.PathLike) -> LoadRun:
    """A load run's folder (`mcpbench load --out DIR`, or `load/` inside a main-job run)."""
    folder = Path(folder)
    samples = folder / "samples.jsonl"
    if not samples.is_file():
        raise ResultsError(f"{folder}: not a load run (no samples.jsonl)")
    summary_path = folder / "summary.json"
    summary = orjson.loads(summary_path.read_bytes()) if summary_path.is_file() else {}
    scenario_path = folder / "scenario.json"
    scenario = orjson.loads(scenario_path.read_bytes()) if scenario_path.is_file() else {}
    history = _csv(folder / "locust_stats_history.csv")
    if "Timestamp" in history:
        history["Timestamp"] = pd.to_datetime(history["Timestamp"], unit="s", utc=True)
    return LoadRun(folder, load_samples(samples), summary, _csv(folder / "locust_stats.csv"), history, _csv(folder / "locust_failures.csv"), scenario)


def load_lab(folder: str | os.PathLike) -> LabRun:
    """A lab run's folder: `sticky.csv` (one row per cell) and `reconnect.csv` when present.

    `sticky_failures` turns the `failed_calls:CLASS` / `failed_sessions:CLASS`
    columns into rows (cell columns, `failure`, `failed_calls`, `failed_sessions`).
    """
    folder = Path(folder)
    path = folder / "sticky.csv"
    reconnect_path = folder / "reconnect.csv"
    if not path.is_file():
        if reconnect_path.is_file():  # a reconnect experiment alone
            empty = pd.DataFrame(columns=STICKY_COLUMNS)
            return LabRun(folder, empty, pd.DataFrame(columns=[*STICKY_COLUMNS[:5], "failure", "failed_calls", "failed_sessions"]),
                          pd.read_csv(reconnect_path))
        raise ResultsError(f"{folder}: not a lab run (no sticky.csv or reconnect.csv)")
    sticky = pd.read_csv(path)
    missing = [c for c in STICKY_COLUMNS if c not in sticky]
    if missing:
        raise ResultsError(f"{path}: missing columns {', '.join(missing)}")
    for column in ("transport", "mode", "policy", "balancer"):
        sticky[column] = sticky[column].astype("category")
    cell = ["transport", "mode", "policy", "balancer", "instances"]
    classes = sorted({c.split(":", 1)[1] for c in sticky.columns if c.startswith(("failed_calls:", "failed_sessions:"))})
    rows = []
    for _, row in sticky.iterrows():
        for name in classes:
            calls, sessions = row.get(f"failed_calls:{name}", 0), row.get(f"failed_sessions:{name}", 0)
            rows.append({**{c: row[c] for c in cell}, "failure": name, "failed_calls": int(calls or 0), "failed_sessions": int(sessions or 0)})
    failures = pd.DataFrame(rows, columns=[*cell, "failure", "failed_calls", "failed_sessions"])
    failures["failure"] = failures["failure"].astype("category")
    reconnect = pd.read_csv(reconnect_path) if reconnect_path.is_file() else None
    return LabRun(folder, sticky, failures, reconnect)


RECONNECT_CELL = ["transport", "fault", "policy", "client"]
BREAK_COLUMNS = ["t", "noticed", "action", "ok", "recover_ms", "lost", "duplicated", "uncertain", "resent", "recovered"]


def load_reconnect(folder: str | os.PathLike) -> ReconnectRun:
    """A reconnect experiment's folder: `reconnect.csv` and, per cell, its samples, SDK calls and fault log."""
    folder = Path(folder)
    path = folder / "reconnect.csv"
    if not path.is_file():
        raise ResultsError(f"{folder}: not a reconnect run (no reconnect.csv)")
    cells = pd.read_csv(path)
    calls, breaks, faults = [], [], []
    for _, cell in cells.iterrows():
        key = {c: cell[c] for c in RECONNECT_CELL}
        cell_dir = folder / "cells" / f"{cell['transport']}-{cell['fault']}-{cell['policy']}"
        if cell["client"] == "sdk":
            lines = list(records(cell_dir / "sdk.jsonl", missing_ok=True))
            steps = [(r["t"], bool(r.get("ok")), r.get("latency_ms")) for r in lines if "t" in r]
            reconnects: list[dict] = []
        else:
            lines = list(records(cell_dir / "samples.jsonl", missing_ok=True))
            steps = [(r["t"], not r.get("failure"), r.get("latency_ms")) for r in lines
                     if r.get("step", "").startswith(("tools/", "resources/", "prompts/")) and r.get("t") is not None]
            reconnects = [r["reconnect"] for r in lines if "reconnect" in r]
        if not steps:
            continue
        start = min(t for t, _, _ in steps)
        calls += [{**key, "t": t - start, "end": t - start + (latency or 0.0) / 1000.0, "ok": ok} for t, ok, latency in steps]
        breaks += [{**key, **{c: b.get(c) for c in BREAK_COLUMNS}, "t": b["t"] - start} for b in reconnects]
        faults += [{**key, "t": f["t"] - start, "kind": f.get("kind")} for f in records(cell_dir / "faults.jsonl", missing_ok=True) if "t" in f]
    frames = [pd.DataFrame(rows, columns=[*RECONNECT_CELL, *columns])
              for rows, columns in ((calls, ["t", "end", "ok"]), (breaks, BREAK_COLUMNS), (faults, ["t", "kind"]))]
    for frame in frames:
        for column in ("transport", "fault", "policy", "client"):
            frame[column] = frame[column].astype("category")
    return ReconnectRun(folder, cells, *frames)


def load_replay(path: str | os.PathLike) -> ReplayReport:
    """A replay report (`mcpbench replay --report r.json`): its calls and changed paths as frames."""
    path = Path(path)
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ResultsError(f"{path}: cannot read replay report: {exc}") from None
    if not isinstance(data, dict) or "sessions" not in data or "counts" not in data:
        raise ResultsError(f"{path}: not a replay report (no sessions and counts)")
    calls, changes = [], []
    for session in data["sessions"]:
        for call in session.get("calls", []):
            step = f"{call['method']} {call['name']}" if call.get("name") else call["method"]
            calls.append(
                {
                    "session": session["id"], "index": call["index"], "method": call["method"], "name": call.get("name"),
                    "step": step, "status": call["status"], "changes": len(call.get("changes") or ()),
                    "latency_ms": call.get("latency_ms"), "recorded_latency_ms": call.get("recorded_latency_ms"), "detail": call.get("detail"),
                }
            )
            for change in call.get("changes") or ():
                changes.append(
                    {
                        "session": session["id"], "index": call["index"], "step": step, "path": change.get("path"),
                        "kind": change.get("kind"), "old": _text(change.get("old")), "new": _text(change.get("new")),
                    }
                )
    call_frame = pd.DataFrame(calls, columns=REPLAY_CALL_COLUMNS).astype({"latency_ms": "float64", "recorded_latency_ms": "float64"})
    for column in ("session", "method", "step", "status"):
        call_frame[column] = call_frame[column].astype("category")
    return ReplayReport(
        path, data.get("kind", "replay"), data.get("trace", ""), data.get("target", ""), data.get("exit_code", 0),
        data["counts"], call_frame, pd.DataFrame(changes, columns=CHANGE_COLUMNS), data,
    )


def _text(value: Any) -> str | None:
    """A changed value as short JSON text (the frame's column has one type)."""
    if value is None:
        return None
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path) if path.is_file() and path.stat().st_size else pd.DataFrame()
