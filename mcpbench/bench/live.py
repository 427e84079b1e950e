"""`mcpbench bench live`: how long a trace line takes to reach the live view's screen, at 100 and 10,000 events/s.

A writer in this process appends a stdio session to a trace with the trace writer (one `os.write`
per event, as the recorders write), at a steady rate: `tools/call` requests and their answers,
each request's id unique. The live view (`mcpbench inspect --follow`) runs in a pseudo-terminal of
160x48, and a reader takes everything it draws. A request's lag is the time from its line's write
to the first time the view draws its id (`#N`) on the terminal. At 10,000 events/s most lines are
drawn over before the next frame: the lag is measured on those that reach the screen, which is
what a user sees; the view keeps up when that lag does not grow over the run (first half against
second half) and its memory stays flat.
"""

import fcntl
import os
import re
import select
import struct
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from mcpbench.bench.common import BENCH_DIR, Panel, bar_panels, write_result
from mcpbench.measures.stats import percentile
from mcpbench.trace.writer import TraceWriter

RATES = (100, 10_000)  # events per second (a request and its answer are two)
SECONDS, QUICK_SECONDS = 10.0, 2.0
COLUMNS, LINES = 160, 48
# The writer wakes up this often and writes the events that are due: a steady rate, few wake-ups.
TICK = 0.002
# How long the view may take to start and draw its first frame.
START_TIMEOUT = 30.0
# After the writer stops, how long the last lines may take to show.
SETTLE_SECONDS = 1.0

_ID = re.compile(rb"#(\d+)(?=[^\d])")


def run(quick: bool = False, out_dir: Path | None = None) -> Path:
    seconds = QUICK_SECONDS if quick else SECONDS
    folder = out_dir or BENCH_DIR
    folder.mkdir(parents=True, exist_ok=True)
    results = {}
    load_before = os.getloadavg()
    for rate in RATES:
        results[str(rate)] = measure(folder / f"live-{rate}.jsonl", rate, seconds)
        (folder / f"live-{rate}.jsonl").unlink(missing_ok=True)
    data = {
        "seconds": seconds,
        "terminal": f"{COLUMNS}x{LINES}",
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "rates": results,
        "lag": "a line's os.write to the first time the view draws its request id on its pseudo-terminal",
    }
    path = write_result("live", data, out_dir)
    labels = [f"{rate:,}/s" for rate in RATES]
    bar_panels(
        path.with_suffix(".png"),
        "live view: line on disk → on screen",
        [Panel(f"lag {name}", labels, [results[str(rate)]["lag_ms"][name] for rate in RATES], "ms") for name in ("p50", "p95", "max")],
    )
    return path


def measure(trace: Path, rate: int, seconds: float) -> dict[str, Any]:
    """Write `rate` events/s for `seconds` into `trace` while the view follows it; the lags seen."""
    writer = TraceWriter(trace, transport="stdio", header={"command": ["bench-live"]})
    view = _View(trace)
    try:
        view.wait_for(b"following", START_TIMEOUT)
        written: dict[int, float] = {}
        cpu_before, rss_before = view.cpu(), view.rss()
        started = time.perf_counter()
        _write(writer, rate, seconds, written)
        wrote = time.perf_counter() - started
        time.sleep(SETTLE_SECONDS)  # a benchmark, not a test: the last frames may come
        cpu, rss_after = view.cpu() - cpu_before, view.rss()
    finally:
        view.stop()
        writer.close()
    seen = view.seen
    lags = sorted((seen[n] - written[n]) * 1000 for n in written if n in seen)
    half = max(written) // 2 if written else 0
    first = [(seen[n] - written[n]) * 1000 for n in written if n in seen and n <= half]
    second = [(seen[n] - written[n]) * 1000 for n in written if n in seen and n > half]
    return {
        "events_per_s": round(2 * len(written) / wrote),
        "events": 2 * len(written),
        "requests_drawn": len(lags),
        "lag_ms": {name: round(percentile(lags, q), 2) for name, q in (("p50", 50), ("p95", 95), ("p99", 99), ("max", 100))},
        "lag_p95_ms_first_half": round(percentile(first, 95), 2),
        "lag_p95_ms_second_half": round(percentile(second, 95), 2),
        "view_cpu_share": round(cpu / (wrote + SETTLE_SECONDS), 3),
        "view_rss_mib": {"start": round(rss_before / 2**20, 1), "end": round(rss_after / 2**20, 1)},
    }


def _write(writer: TraceWriter, rate: int, seconds: float, written: dict[int, float]) -> None:
    """`rate` events a second: request N, then its answer; `written[N]` the request line's write time."""
    interval = 2.0 / rate  # a request and its answer per interval
    start = time.perf_counter()
    n = 0
    while (now := time.perf_counter()) - start < seconds:
        due = int((now - start) / interval) + 1
        while n < due:
            n += 1
            ts = time.time()
            request = orjson.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}})
            writer.message("bench", "c2s", request, ts)
            written[n] = time.perf_counter()
            answer = orjson.dumps({"jsonrpc": "2.0", "id": n, "result": {"content": [{"type": "text", "text": "x"}]}})
            writer.message("bench", "s2c", answer, ts)
        time.sleep(TICK)


class _View:
    """`mcpbench inspect --follow TRACE` on a pseudo-terminal, everything it draws read as it comes."""

    def __init__(self, trace: Path) -> None:
        import subprocess

        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(LINES)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpbench", "inspect", "--follow", str(trace)],
            stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, close_fds=True,
        )
        os.close(slave)
        self.master = master
        self.seen: dict[int, float] = {}  # request id -> when its `#N` was first drawn
        self._text = b""
        self._lock = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        tail = b""
        while True:
            try:
                ready, _, _ = select.select([self.master], [], [], 1.0)
                if not ready:
                    if self.proc.poll() is not None:
                        return
                    continue
                chunk = os.read(self.master, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            now = time.perf_counter()
            data = tail + chunk
            seen = self.seen
            for match in _ID.finditer(data):
                seen.setdefault(int(match.group(1)), now)
            tail = data[-32:]
            with self._lock:
                self._text = (self._text + chunk)[-(1 << 16) :]
                self._lock.notify_all()

    def wait_for(self, text: bytes, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            while text not in self._text:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise RuntimeError(f"the live view did not show {text!r} within {timeout:g} s: {self._text[-400:]!r}")
                self._lock.wait(left)

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.write(self.master, b"q")
            try:
                self.proc.wait(10)
            except Exception:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(5)
        os.close(self.master)
