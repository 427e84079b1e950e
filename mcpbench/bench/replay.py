"""`mcpbench bench replay`: replay throughput against a plain client loop, and trace reading speed.

One run, same machine, same reference server (stdio, a fresh process each time):

1. a plain client loop (blocking pipe I/O: the client core builds one `tools/call echo`, it is
   written, its answer read, framed and decoded, repeat) makes CALLS calls; its messages become a
   trace;
2. the replayer replays that trace against a fresh server (answers compared on the way); it does
   more per answer than the loop (the core's waiter table and session state, the recorded call it
   belongs to), and builds each request while it waits for the answer before it, so that an answer
   leaves only the write to do;
3. steps 1 and 2 alternate, plain loop first and last; each replay round is set against the mean
   of the plain rounds on either side of it, and the ratio is the median of those: a noisy moment
   on a 2-core machine moves one round, not the ratio (each side's best round is kept as well);
4. the trace is read back (`TraceReader`, then the full replay plan) and timed.

Throughput counts the echo calls only, from the first call's send to the last call's answer:
process start and the handshake are the same for both sides and are left out.
Targets: the replayer keeps >= 80 % of the plain loop's throughput (issue 4) and, since the client
core, no less than the plain loop (issue 10: ratio >= 1.0); reading >= 200 MB/s.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcpbench.bench.common import bar_chart, write_result
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.client import ClientConnection, initialize_request, initialized_notification
from mcpbench.protocol.observer import Observed, StdioObserver
from mcpbench.protocol.session import S2C
from mcpbench.protocol.versions import LATEST_HANDSHAKE
from mcpbench.trace.format import now
from mcpbench.trace.writer import TraceWriter

# Many short rounds rather than a few long ones: a pair of neighbouring rounds then spans a couple
# of seconds, shorter than the slow spells of this shared 2-core machine (seconds to tens of
# seconds), so more pairs see both sides under the same load. One pair still moves by 2-3 %; the
# median of 25 pairs moves by well under 1 %, which a ratio near 1.0 needs. 1,000 calls keep process
# start-up (left out of the timing) and the first calls' warm-up small against a round.
CALLS = 1_000
QUICK_CALLS = 500
ROUNDS = 25
QUICK_ROUNDS = 5
KEEP_RATIO = 0.80
NO_REGRESSION_RATIO = 1.0
READ_MB_S = 200.0
READ_SIZE = 64 * 1024


def server_argv() -> list[str]:
    return [sys.executable, "-m", "mcpbench", "lab", "serve", "--transport", "stdio"]


def plain_loop(calls: int, trace: Path | None) -> float:
    """Make `calls` echo calls one after the other; return calls/s (and write the trace if asked)."""
    proc = subprocess.Popen(server_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    client = ClientConnection("stdio", LATEST_HANDSHAKE)
    observer = StdioObserver(S2C)
    stdin, stdout = proc.stdin.fileno(), proc.stdout.fileno()
    log: list[tuple[str, bytes, float]] = []

    def send(out) -> None:
        log.append(("c2s", out.data[:-1], now()))
        os.write(stdin, out.data)

    def answer() -> None:
        while True:
            for event in observer.feed(os.read(stdout, READ_SIZE)):
                if type(event) is Observed:
                    log.append(("s2c", event.raw, now()))
                    if isinstance(event.message, (jsonrpc.Response, jsonrpc.ErrorResponse)):
                        return

    try:
        send(client.send(initialize_request(client)))
        answer()
        send(client.send(initialized_notification()))
        started = time.perf_counter()
        for index in range(calls):
            send(client.send(client.prepare("tools/call", {"name": "echo", "arguments": {"text": f"message {index}"}})))
            answer()
        elapsed = time.perf_counter() - started
    finally:
        proc.stdin.close()
        proc.wait(10)
    if trace is not None:
        with TraceWriter(trace, transport="stdio", header={"command": server_argv()}) as writer:
            for direction, data, ts in log:
                writer.message("bench", direction, data, ts)
    return calls / elapsed


def replay_once(trace: Path) -> tuple[float, int]:
    """Replay `trace` against a fresh server; return (calls/s over the echo calls, changed calls)."""
    from mcpbench.replay import plan as plans
    from mcpbench.replay.compare import IgnoreRules
    from mcpbench.replay.engine import Replayer
    from mcpbench.replay.report import Judging, build
    from mcpbench.system.target import Target

    recorded = plans.load(trace)
    run = Replayer(Target("stdio", argv=tuple(server_argv()))).run(recorded)
    calls = [live for live in run.sessions[0].calls if live.call.method == "tools/call"]
    started = calls[0].sent
    finished = max(live.answered for live in calls if live.answered is not None)
    report = build(run, Judging(IgnoreRules(), latency=None))
    return len(calls) / (finished - started), report.counts()["changed"] + report.counts()["failed"]


def read_speed(trace: Path) -> dict[str, float]:
    from mcpbench.replay import plan as plans
    from mcpbench.trace.reader import TraceReader

    size = trace.stat().st_size
    best_events = best_plan = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _event in TraceReader(trace):
            pass
        best_events = min(best_events, time.perf_counter() - started)
        started = time.perf_counter()
        plans.load(trace)
        best_plan = min(best_plan, time.perf_counter() - started)
    mb = size / 1e6
    return {"bytes": size, "reader_mb_s": mb / best_events, "plan_mb_s": mb / best_plan}


# The large-message trace: calls whose results are this big (like `big` or a file read).
LARGE_RESULT_BYTES = 64 * 1024
LARGE_CALLS = 500


def large_message_trace(path: Path, calls: int = LARGE_CALLS) -> Path:
    """A synthetic stdio trace of `calls` echo calls answered with 64 KiB texts."""
    import orjson

    from mcpbench.trace.writer import TraceWriter

    text = "x" * LARGE_RESULT_BYTES
    with TraceWriter(path, transport="stdio", header={"command": ["synthetic"]}) as writer:
        for i in range(1, calls + 1):
            request = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
            answer = {"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": text}], "isError": False}}
            writer.message("s", "c2s", orjson.dumps(request), float(i))
            writer.message("s", "s2c", orjson.dumps(answer), i + 0.001)
    return path


def run(quick: bool = False) -> Path:
    calls = QUICK_CALLS if quick else CALLS
    with tempfile.TemporaryDirectory(prefix="mcpbench-bench-replay-") as tmp:
        trace = Path(tmp) / "calls.jsonl"
        plain_rounds, replay_rounds, changed = [plain_loop(calls, trace)], [], 0
        for _ in range(QUICK_ROUNDS if quick else ROUNDS):
            rate, bad = replay_once(trace)
            replay_rounds.append(rate)
            changed += bad
            plain_rounds.append(plain_loop(calls, None))
        reading = read_speed(trace)
        large = read_speed(large_message_trace(Path(tmp) / "large.jsonl", LARGE_CALLS // 5 if quick else LARGE_CALLS))
    plain, replayed = max(plain_rounds), max(replay_rounds)
    paired = sorted(rate / ((plain_rounds[i] + plain_rounds[i + 1]) / 2) for i, rate in enumerate(replay_rounds))
    ratio = paired[len(paired) // 2]
    data = {
        "calls": calls,
        "transport": "stdio",
        "plain_loop_calls_per_s": plain,
        "replay_calls_per_s": replayed,
        "ratio": ratio,
        "paired_ratios": paired,
        "paired_quartiles": [paired[len(paired) // 4], paired[(3 * len(paired)) // 4]],
        "ratio_best_rounds": replayed / plain,
        "rounds": {"plain": plain_rounds, "replay": replay_rounds},
        "changed_calls": changed,
        "trace": reading,
        "trace_64k_results": large,
        "targets": {"ratio": KEEP_RATIO, "ratio_no_regression": NO_REGRESSION_RATIO, "read_mb_s": READ_MB_S},
        "pass": {
            "ratio": ratio >= KEEP_RATIO,
            "ratio_no_regression": ratio >= NO_REGRESSION_RATIO,
            "read_small_lines": reading["reader_mb_s"] >= READ_MB_S,
            "read_64k_results": large["reader_mb_s"] >= READ_MB_S,
            "plan_small_lines": reading["plan_mb_s"] >= READ_MB_S,
            "plan_64k_results": large["plan_mb_s"] >= READ_MB_S,
        },
        "quick": quick,
    }
    path = write_result("replay", data)
    bar_chart(path.with_suffix(".png"),
              f"Replay vs plain loop ({calls} echo calls, stdio): each side's best round; "
              f"median of paired rounds {ratio:.3f}",
              ["plain loop", "replay"], [plain, replayed], "calls/s")
    return path
