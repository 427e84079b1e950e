"""Raw samples of a load run (JSONL) and the summary computed from them.

One line per reported step, written by a listener on Locust's request event in
every locust process (`samples.<pid>.jsonl`, merged into `samples.jsonl` by the
runner)::

    {"t": 1733131495.12, "type": "streamable-http", "step": "tools/call echo",
     "latency_ms": 3.2, "size": 312, "failure": null, "ttfe_ms": 2.9}

`failure` is the failure class (session-not-found, answer-lost/timeout,
stream-closed, http-4xx, http-5xx, jsonrpc-error, tool-error, connect-failed)
or null, with `detail` (like "HTTP 404 JSON-RPC -32600 Session not found") when
it failed; an authentication failure (auth-required, auth-forbidden) adds the
server's `challenge` ({resource_metadata, scope, error}), and OAuth's discovery and
token requests are steps of type "oauth". `session` tags the client session a step belongs to, and `instance`
names the server instance that answered when a lab balancer said so. Open-model runs add `uncorrected_ms` (latency from the actual send;
`latency_ms` is measured from the intended start) and `lag_ms` (how late the call left: the
schedule falling behind; also a recorded schedule's, `load --from-trace --speed`), and, once per
process at the end, `{"open": {...}}` with scheduled/late/dropped counts. The summary's
`schedule_lag` holds the lag's p50, p95 and max. A whole operation (2026-07-28 input rounds, a
task) adds `rounds` (the requests its rounds took), `rounds_ms` (each one's latency, when more than
one), `polls` (its task's `tasks/get`s), `wait_ms` (the client's own wait: think time before each
answer, backoff, poll intervals) and `asked` (the kinds of input the server asked for); the summary's
step rows then carry `operation`: rounds and polls per step, and the p50 of the step, of the sum of
its rounds and of the client's wait.

When a sample file cannot be written (disk full, file size limit), the process goes on measuring
(never break what you measure), counts the samples it could not keep, and says so once on the
status pipe the runner gives it (`MCPBENCH_STATUS_FD`): `<file>: <reason>`. The runner then marks
the summary as incomplete and exits 3.

Nothing here imports Locust.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from mcpbench.files.outputs import atomic_path
from mcpbench.measures.stats import percentile

if TYPE_CHECKING:
    from mcpbench.load.histograms import Columns

# Samples are written through a buffer this large: one write per ~500 samples.
WRITE_BUFFER = 64 * 1024
# ... and flushed at least this often, so `tail -f` (and a test) sees a running load.
FLUSH_INTERVAL = 1.0


def records(path: str | Path, *, missing_ok: bool = False) -> Iterator[dict]:
    """The JSON objects of a JSON Lines results file (samples, fault logs, SDK client calls), as written.

    Blank lines and a torn last line (a process killed mid-write) are skipped; `missing_ok`: a file
    that does not exist has none.
    """
    if missing_ok and not Path(path).is_file():
        return
    yield from (record for _, record in numbered_records(path))


def numbered_records(path: str | Path) -> Iterator[tuple[int, dict]]:
    """`records`, each with its line number (from 1): what a reader names when it drops one."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                yield number, record


def sample_line(request_type: str, name: str, response_time: float, response_length: int, exception: Any = None, context: Any = None, start_time: float | None = None) -> bytes:
    """One step as a samples.jsonl line (with its newline), from a Locust request event's fields."""
    ctx = context or {}
    failure = None
    if exception is not None:
        failure = ctx.get("failure") or getattr(exception, "kind", None) or "error"
    if not isinstance(start_time, int | float) or not math.isfinite(start_time):
        # A listener called without the start (an event fired by another hand): now, less the latency,
        # is when the step started; a null would leave it out of every series over time.
        start_time = time.time() - response_time / 1000.0
    record: dict[str, Any] = {
        "t": start_time, "type": request_type, "step": name,
        "latency_ms": round(response_time, 3), "size": response_length, "failure": failure,
    }
    if failure is not None and (detail := getattr(exception, "detail", None)):
        record["detail"] = detail
    if (session := ctx.get("session")) is not None:
        record["session"] = session
    if (instance := ctx.get("instance")) is not None:
        record["instance"] = instance
    if (challenge := ctx.get("challenge")) is not None:
        record["challenge"] = challenge
    if (ttfe := ctx.get("ttfe")) is not None:
        record["ttfe_ms"] = round(ttfe, 3)
    if (uncorrected := ctx.get("uncorrected")) is not None:
        record["uncorrected_ms"] = round(uncorrected, 3)
    if (lag := ctx.get("lag")) is not None:
        record["lag_ms"] = round(lag, 3)
    if (changes := ctx.get("changes")) is not None:  # a listen stream's step: the changes it brought
        record["changes"] = changes
    if (rounds := ctx.get("rounds")) is not None:  # a whole operation (`McpClient.operation`)
        record["rounds"], record["polls"], record["wait_ms"] = rounds, ctx.get("polls", 0), round(ctx.get("wait", 0.0), 3)
        if (took := ctx.get("rounds_ms")) is not None:
            record["rounds_ms"] = [round(ms, 3) for ms in took]
        if (asked := ctx.get("asked")) is not None:
            record["asked"] = asked
    return orjson.dumps(record) + b"\n"


class SampleWriter:
    """A Locust request-event listener that appends one JSON line per step.

    A write that fails stops the writing, not the run: `error` says why, `lost` counts the samples
    not kept, and the reason goes once to the file descriptor `status_fd` (a pipe to the runner).
    """

    def __init__(self, path: str | Path, status_fd: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: BinaryIO | None = open(self.path, "ab", buffering=WRITE_BUFFER)
        self.count = 0
        self.lost = 0
        self.error: str | None = None
        self._status_fd = status_fd
        self._flushed = time.monotonic()

    def on_request(self, request_type: str, name: str, response_time: float, response_length: int, exception: Any = None, context: Any = None, start_time: float | None = None, **_: Any) -> None:
        if self._file is None:
            self.lost += self.error is not None
            return
        line = sample_line(request_type, name, response_time, response_length, exception, context, start_time)
        try:
            self._file.write(line)
            self.count += 1
            if (now := time.monotonic()) - self._flushed > FLUSH_INTERVAL:
                self._flushed = now
                self._file.flush()
        except OSError as exc:
            self._failed(exc)

    def write_lines(self, data: bytes, lines: int) -> None:
        """Append `lines` whole lines at once (a batch a worker sent the master), flushed as samples are."""
        if self._file is None:
            self.lost += lines if self.error is not None else 0
            return
        try:
            self._file.write(data)
            self.count += lines
            if (now := time.monotonic()) - self._flushed > FLUSH_INTERVAL:
                self._flushed = now
                self._file.flush()
        except OSError as exc:
            self._failed(exc)
            self.lost += lines - 1  # _failed counted one

    def on_reconnect(self, record: dict) -> None:
        """One break and what the client did about it: a `{"reconnect": {...}}` line."""
        self.write_extra({"reconnect": record})

    def write_extra(self, record: dict) -> None:
        if self._file is not None:
            try:
                self._file.write(orjson.dumps(record) + b"\n")
            except OSError as exc:
                self._failed(exc)

    def flush(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
            except OSError as exc:
                self._failed(exc)

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:  # the buffer's last samples did not fit
                self._failed(exc)
            self._file = None

    def _failed(self, exc: OSError) -> None:
        """Stop writing (what is on disk stays readable; a torn last line is skipped) and say why, once."""
        if (file := self._file) is not None:
            self._file = None
            try:
                file.close()  # closes the file even when its flush fails again
            except OSError:
                pass
        self.lost += 1
        if self.error is None:
            self.error = f"{self.path}: {exc.strerror or exc}"
            if self._status_fd is not None:
                try:
                    os.write(self._status_fd, self.error.encode(errors="replace") + b"\n")
                except OSError:
                    pass  # the runner is gone; nothing more to tell


def merge(parts: list[Path], out: Path) -> list[int]:
    """Concatenate per-process sample files into `out` (sorted by start time) and remove the parts.

    Returns how many lines each part gave, in the order of `parts`: which processes ran users.
    """
    lines: list[tuple[float, bytes]] = []
    counts: list[int] = []
    for part in parts:
        counts.append(0)
        with open(part, "rb") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    t = orjson.loads(line).get("t") or 0.0
                except orjson.JSONDecodeError:
                    continue  # a process killed mid-write leaves a torn last line
                lines.append((t, line if line.endswith(b"\n") else line + b"\n"))
                counts[-1] += 1
    lines.sort(key=lambda item: item[0])
    with atomic_path(out) as tmp, open(tmp, "wb") as handle:
        handle.writelines(line for _, line in lines)
    for part in parts:
        if part != out:
            part.unlink()
    return counts


def _stats(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {}
    return {
        "p50": percentile(latencies, 50), "p90": percentile(latencies, 90), "p95": percentile(latencies, 95),
        "p99": percentile(latencies, 99), "avg": sum(latencies) / len(latencies), "max": max(latencies),
    }


@contextlib.contextmanager
def _lines(paths: str | Path | list[Path]) -> Iterator[Iterator[bytes]]:
    """The lines of one sample file, or of several read one after another."""
    with contextlib.ExitStack() as stack:
        files = paths if isinstance(paths, list) else [paths]
        yield itertools.chain.from_iterable(stack.enter_context(open(p, "rb")) for p in files)


def summarize(path: str | Path | list[Path], duration: float | None = None, columns: Columns | None = None) -> dict[str, Any]:
    """Per-step and overall counts, failures by class, latency percentiles (ms), rps, open-model counts.

    `path` may be a list: the per-process files when they could not be merged. `columns`: each step
    sample is added to it as well (`load/histograms.py`: the run's histograms from the same pass).
    """
    steps: dict[tuple[str, str], dict[str, Any]] = defaultdict(lambda: {"lat": [], "ttfe": [], "unc": [], "count": 0, "failures": 0, "classes": defaultdict(int), "ops": []})
    all_lat: list[float] = []
    all_unc: list[float] = []
    all_corr: list[float] = []  # latency_ms of the steps that also have an uncorrected value
    lags: list[float] = []  # lag_ms: how far each scheduled call left behind its due time
    classes: dict[str, int] = defaultdict(int)
    total = failures = 0
    t_min, t_max = math.inf, -math.inf
    open_stats: dict[str, float] = defaultdict(float)
    reconnects: list[dict] = []
    said: dict[str, str] = {}  # an authentication failure class -> the first one's detail (its challenge)
    asked: set[str] = set()  # the kinds of input servers asked for in whole operations
    with _lines(path) as handle:
        for line in handle:
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if "reconnect" in rec:
                reconnects.append(rec["reconnect"])
                continue
            if "open" in rec:
                for key, value in rec["open"].items():
                    if key in ("rate", "max_lateness"):
                        open_stats[key] = open_stats[key] + value if key == "rate" else value
                    else:
                        open_stats[key] += value
                continue
            entry = steps[(rec["type"], rec["step"])]
            entry["count"] += 1
            total += 1
            latency = rec["latency_ms"]
            entry["lat"].append(latency)
            all_lat.append(latency)
            if rec.get("ttfe_ms") is not None:
                entry["ttfe"].append(rec["ttfe_ms"])
            if rec.get("lag_ms") is not None:
                lags.append(rec["lag_ms"])
            if rec.get("uncorrected_ms") is not None:
                entry["unc"].append(rec["uncorrected_ms"])
                all_unc.append(rec["uncorrected_ms"])
                all_corr.append(latency)
            if rec.get("rounds") is not None:  # a whole operation: only what its row needs is kept
                took = rec.get("rounds_ms")
                entry["ops"].append((latency, rec["rounds"], rec.get("polls", 0), rec.get("wait_ms", 0.0), sum(took) if took else None))
                asked.update(rec.get("asked") or ())
            if rec.get("failure"):
                entry["failures"] += 1
                entry["classes"][rec["failure"]] += 1
                classes[rec["failure"]] += 1
                failures += 1
                if rec["failure"].startswith(AUTH_PREFIX) and rec["failure"] not in said:
                    said[rec["failure"]] = rec.get("detail") or ""
            t = rec.get("t")
            if columns is not None:
                columns.add(rec["type"], rec["step"], latency, bool(rec.get("failure")), t)
            if t is not None:
                t_min, t_max = min(t_min, t), max(t_max, t + latency / 1000.0)
    span = duration if duration else (t_max - t_min if total else 0.0)
    out_steps = []
    for (kind, step), entry in sorted(steps.items()):
        row: dict[str, Any] = {"type": kind, "step": step, "count": entry["count"], "failures": entry["failures"], **_stats(entry["lat"])}
        if entry["classes"]:
            row["failure_classes"] = dict(entry["classes"])
        if entry["ttfe"]:
            row["ttfe"] = _stats(entry["ttfe"])
        if entry["unc"]:
            row["uncorrected"] = _stats(entry["unc"])
        if entry["ops"]:
            row["operation"] = operation_stats(entry["ops"])
        row["fail_ratio"] = entry["failures"] / entry["count"] if entry["count"] else 0.0
        row["rps"] = entry["count"] / span if span else 0.0
        out_steps.append(row)
    summary: dict[str, Any] = {
        "total": {"count": total, "failures": failures, "fail_ratio": failures / total if total else 0.0, "rps": total / span if span else 0.0, **_stats(all_lat)},
        "steps": out_steps,
        "failure_classes": dict(classes),
        "duration_s": span,
    }
    if all_unc:
        summary["total"]["uncorrected"] = _stats(all_unc)
        summary["total"]["corrected"] = _stats(all_corr)
    if lags:
        summary["schedule_lag"] = {"count": len(lags), "p50": percentile(lags, 50), "p95": percentile(lags, 95), "max": max(lags)}
    if open_stats:
        summary["open_model"] = dict(open_stats)
    if reconnects:
        summary["reconnects"] = reconnect_summary(reconnects)
    if said:
        summary["auth_failures"] = said
    if asked:
        summary["input_asked"] = sorted(asked)
    return summary


def operation_stats(ops: list[tuple]) -> dict[str, Any]:
    """A step's whole operations, each (latency, rounds, polls, wait, sum of its rounds' latencies or None):
    rounds and polls per step, and the p50 of the step against the p50 of the sum of its rounds (the
    requests alone) and of the client's wait."""
    sums = [op[4] for op in ops if op[4] is not None]
    # What the step took beyond its requests and its wait: the client's own work between rounds.
    rest = [op[0] - op[4] - op[3] for op in ops if op[4] is not None]
    return {
        "count": len(ops),
        "rounds": sum(op[1] for op in ops) / len(ops),
        "max_rounds": max(op[1] for op in ops),
        "polls": sum(op[2] for op in ops) / len(ops),
        "p50": percentile([op[0] for op in ops], 50),
        "rounds_sum_p50": percentile(sums, 50) if sums else None,
        "wait_p50": percentile([op[3] for op in ops], 50),
        "rest_p50": percentile(rest, 50) if rest else None,
    }


def metric(summary: dict[str, Any], name: str, step: str | None = None) -> float | None:
    """The value a threshold compares: pNN/avg/max (ms), fail_ratio, rps; for one step or all."""
    if step is None:
        row = summary["total"]
        if name.startswith("p") and name not in row and row.get("count"):
            return None
    else:
        rows = [r for r in summary["steps"] if r["step"] == step or f"{r['type']} {r['step']}" == step]
        if not rows:
            return None
        if len(rows) == 1:
            row = rows[0]
        else:  # the same step under several request types (an era comparison): the worst one
            values = [metric({"total": r, "steps": []}, name) for r in rows]
            values = [v for v in values if v is not None]
            if not values:
                return None
            return min(values) if name == "rps" else max(values)
    if name in ("fail_ratio", "rps", "avg", "max"):
        return row.get(name)
    if name.startswith("p"):
        if name in row:
            return row[name]
        # an arbitrary percentile needs the raw values; the summary keeps the usual ones
        return None
    return None


# The failure classes of authentication (`protocol.http.AUTH_FAILURES`) share this prefix.
AUTH_PREFIX = "auth-"

# The narrowest type and step columns of `render`.
TYPE_WIDTH, STEP_WIDTH = 18, 28


# Per-break counts the reconnect records carry, summed per action.
RECONNECT_COUNTS = ("resent", "recovered", "lost", "uncertain", "duplicated", "replayed", "extra_requests", "budget_denied")


def reconnect_summary(records: list[dict]) -> dict[str, dict[str, Any]]:
    """Breaks per action (none, retry, resume, reinitialize): how many, recovered, time to recover, what was lost."""
    out: dict[str, dict[str, Any]] = {}
    for action in sorted({r["action"] for r in records}):
        rows = [r for r in records if r["action"] == action]
        times = [r["recover_ms"] for r in rows if r.get("recover_ms") is not None]
        out[action] = {
            "breaks": len(rows), "recovered_breaks": sum(1 for r in rows if r.get("ok")),
            "recover_ms": _stats(times), **{key: sum(r.get(key, 0) for r in rows) for key in RECONNECT_COUNTS},
        }
    return out


def render(summary: dict[str, Any]) -> str:
    """The summary as a small text table."""
    # Columns as wide as their longest name (at least the usual width): nothing cut, all aligned.
    tw = max([TYPE_WIDTH] + [len(row["type"]) for row in summary["steps"]])
    sw = max([STEP_WIDTH] + [len(row["step"]) for row in summary["steps"]])
    lines = [f"{'type':<{tw}} {'step':<{sw}} {'count':>7} {'fail':>5} {'p50':>8} {'p95':>8} {'p99':>8} {'ttfe p50':>9}"]
    for row in summary["steps"]:
        ttfe = row.get("ttfe", {}).get("p50")
        lines.append(
            f"{row['type']:<{tw}} {row['step']:<{sw}} {row['count']:>7} {row['failures']:>5} "
            f"{row.get('p50', float('nan')):>8.1f} {row.get('p95', float('nan')):>8.1f} {row.get('p99', float('nan')):>8.1f} "
            f"{'' if ttfe is None else format(ttfe, '.1f'):>9}"
        )
    total = summary["total"]
    lines.append(
        f"{'total':<{tw}} {'':<{sw}} {total['count']:>7} {total['failures']:>5} {total.get('p50', float('nan')):>8.1f} "
        f"{total.get('p95', float('nan')):>8.1f} {total.get('p99', float('nan')):>8.1f}   ({total['rps']:.1f} steps/s, ms)"
    )
    if incomplete := summary.get("samples_incomplete"):
        lines.append(f"samples incomplete: {'; '.join(incomplete)}")
    if summary["failure_classes"]:
        lines.append("failures: " + ", ".join(f"{k} {v}" for k, v in sorted(summary["failure_classes"].items())))
    for method in summary.get("input_never_asked") or ():
        lines.append(f"warning: input_responses answers {method}, which the server never asked for")
    for kind, detail in sorted((summary.get("auth_failures") or {}).items()):
        lines.append(f"{kind}: {detail}")  # what the server asked for: its challenge, or the token endpoint's refusal
    several = len({row["type"] for row in summary["steps"]}) > 1  # an era comparison: say whose step it is
    for row in summary["steps"]:
        if (op := row.get("operation")) and (op["max_rounds"] > 1 or op["polls"]):
            step = f"{row['type']} {row['step']}" if several else row["step"]
            summed = "" if op["rounds_sum_p50"] is None else (
                f", its rounds' sum {op['rounds_sum_p50']:.1f} ms, the rest between them {op['rest_p50']:.1f} ms")
            lines.append(f"{step}: {op['rounds']:.2f} rounds and {op['polls']:.2f} polls a step; p50 {op['p50']:.1f} ms "
                         f"from the first request to the result, the client's wait {op['wait_p50']:.1f} ms{summed}")
    if "uncorrected" in total:
        unc, cor = total["uncorrected"], total["corrected"]
        lines.append(
            f"open model calls: corrected p50/p95/p99 {cor['p50']:.1f}/{cor['p95']:.1f}/{cor['p99']:.1f} ms, "
            f"uncorrected {unc['p50']:.1f}/{unc['p95']:.1f}/{unc['p99']:.1f} ms"
        )
    if lag := summary.get("schedule_lag"):
        lines.append(f"schedule lag (calls leaving after their due time): p50 {lag['p50']:.1f} ms, p95 {lag['p95']:.1f} ms, "
                     f"max {lag['max']:.1f} ms over {lag['count']} calls")
    if om := summary.get("open_model"):
        lines.append(
            f"open model: {int(om.get('scheduled', 0))} starts scheduled at {om.get('rate', 0):g}/s, "
            f"{int(om.get('late', 0))} late, {int(om.get('dropped', 0))} dropped, {int(om.get('failed_starts', 0))} failed to connect"
        )
    if workers := summary.get("samples_per_worker"):
        lost = summary.get("samples_lost") or {}
        lines.append(
            f"workers: {len(workers)}, {sum(w['received'] for w in workers.values())} samples reached the master"
            + f", {lost.get('in_transit', 0)} lost on the way, {lost.get('dropped', 0)} dropped by workers whose buffer was full"
        )
        for worker in summary.get("workers_died") or []:
            row = workers[worker]
            lines.append(f"worker {worker} ({row['host']}, pid {row['pid']}) died mid-run: {row['received']} samples reached the master before")
    for action, row in (summary.get("reconnects") or {}).items():
        took = row["recover_ms"]
        lines.append(
            f"reconnect {action}: {row['breaks']} breaks, {row['recovered_breaks']} recovered"
            + (f" (p50 {took['p50']:.0f} ms, p95 {took['p95']:.0f} ms)" if took else "")
            + f", {row['lost']} answers lost, {row['duplicated']} duplicated, {row['uncertain']} uncertain, "
            f"{row['extra_requests']} extra requests"
        )
    return "\n".join(lines)
