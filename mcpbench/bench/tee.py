"""`mcpbench bench tee`: what the stdio tee costs, measured against no tee in the same run.

- Round trips: one request, wait for its answer, repeat (after the handshake,
  untimed); against a fast echo server started directly and through
  `mcpbench tee` (recording on), the two taking turns every 100 round trips;
  then direct and the tee with recording off, alike; then the tee against a
  plain pipe-through tee in Python (`plain_tee.py`: three copying threads, no
  recording), alike. The added p50
  is the median over turns of the difference between back-to-back turns
  (`paired_added_p50`); the difference of the pooled p50s is kept beside it.
  Each comparison is run `ROTATIONS` times with fresh processes and its turns pooled.
- One-way throughput: 1 KiB messages pushed into `cat > /dev/null`, through a
  plain pipe and through the tee.

Targets: ≤ 50 µs added p50 and ≤ 200 µs added p99 per round trip (against
direct); sequential round trips/s ≥ 1.0× the plain tee's; ≥ 100,000 messages/s
of 1 KiB one way.
"""

import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcpbench.bench.common import write_result
from mcpbench.files.outputs import atomic_path
from mcpbench.protocol.versions import LATEST_HANDSHAKE
from mcpbench.measures.stats import percentile, summary

ECHO = [sys.executable, "-m", "mcpbench.bench.echo_server"]
SINK = ["sh", "-c", "cat > /dev/null"]
REQUEST = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}\n'
# Each server's session starts with the handshake, untimed, so the calls are a valid session: the
# recorder then records messages, not a `request-before-initialized` violation per call (which
# took it 8.5 µs per message against 4.75 µs, and its work shares this machine with the session).
HANDSHAKE = (
    b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"' + LATEST_HANDSHAKE.encode() + b'",'
    b'"capabilities":{},"clientInfo":{"name":"mcpbench-bench","version":"0"}}}\n',
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
)
MESSAGE_SIZE = 1024
WARMUP = 200
TURN = 100  # round trips per server before the other takes its turn
# Each comparison runs this many times with fresh processes, the first-to-go alternating. Where
# the scheduler places the processes (which shares a core with what) holds for a whole rotation
# and moved one rotation's ratio by +-5 % from run to run; pooled over rotations, it cancels.
ROTATIONS = 8
READY_TIMEOUT = 30.0


# The tee's copy threads with recording off (no `mcpbench tee` option does that: a tee is for recording).
UNRECORDED = [sys.executable, "-c", "import sys; from mcpbench.stdio.tee import run_tee; sys.exit(run_tee(sys.argv[1:], None, record=False))"]
# The baseline: a pipe-through tee as anyone would write it in Python.
PLAIN_TEE = [sys.executable, "-m", "mcpbench.bench.plain_tee"]


def tee_argv(trace: Path) -> list[str]:
    return [sys.executable, "-m", "mcpbench", "tee", "--out", str(trace), "--"]


def round_trips(argvs: dict[str, list[str]], count: int) -> dict[str, list[list[float]]]:
    """Latencies (µs) of `count` sequential round trips to each server, by turn.

    The servers run side by side and take turns every `TURN` round trips, so
    drift in this machine's speed (a shared VM) hits each of them alike.
    Returns each server's samples as one list per turn.
    """
    procs = {
        name: subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
        for name, argv in argvs.items()
    }
    turns: dict[str, list[list[float]]] = {name: [] for name in argvs}
    try:
        for name, proc in procs.items():
            proc.stdin.write(HANDSHAKE[0])
            if not proc.stdout.readline():
                raise RuntimeError(f"{argvs[name]} closed its stdout")
            proc.stdin.write(HANDSHAKE[1])
        for turn in range(-(-(WARMUP + count) // TURN)):
            for name, proc in procs.items():
                write, read = proc.stdin.write, proc.stdout.readline
                samples = []
                for i in range(turn * TURN, min((turn + 1) * TURN, WARMUP + count)):
                    start = time.perf_counter()
                    write(REQUEST % i)
                    if not read():
                        raise RuntimeError(f"{argvs[name]} closed its stdout")
                    if i >= WARMUP:
                        samples.append((time.perf_counter() - start) * 1e6)
                if samples:
                    turns[name].append(samples)
    finally:
        for proc in procs.values():
            proc.stdin.close()
            proc.wait(30)
    return turns


def rotations(argvs: dict[str, list[str]], count: int, times: int) -> dict[str, list[list[float]]]:
    """`round_trips` `times` over with fresh processes, the order of turns alternating; turns pooled."""
    pooled: dict[str, list[list[float]]] = {name: [] for name in argvs}
    names = list(argvs)
    for rotation in range(times):
        order = names if rotation % 2 == 0 else names[::-1]
        turns = round_trips({name: argvs[name] for name in order}, count)
        for name in names:
            pooled[name] += turns[name]
    return pooled


def paired_added_p50(base: list[list[float]], other: list[list[float]]) -> float:
    """The median, over turns, of `other`'s p50 minus `base`'s p50 in the same turn.

    Each difference is taken between turns run back to back, so a slow spell
    of the host (seconds long on this shared VM) cancels out instead of
    landing on one side of the comparison.
    """
    return statistics.median(percentile(b, 50) - percentile(a, 50) for a, b in zip(base, other, strict=True))


def one_way(argv: list[str], count: int, *, ready_line: bool = False) -> float:
    """Seconds to push `count` 1 KiB messages through `argv` until it has read them all.

    With `ready_line`, timing starts once the process has printed its first
    stderr line (the tee's "recording to …"): interpreter start-up is not
    throughput. The tee's exit, which waits for its recorder, ends the timing,
    so every message was both forwarded and recorded.
    """
    pad = MESSAGE_SIZE - len(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":""}}\n')
    line = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"' + b"x" * pad + b'"}}\n'
    block = line * 256
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE if ready_line else subprocess.DEVNULL)
    if ready_line:
        ready, _, _ = select.select([proc.stderr], [], [], READY_TIMEOUT)
        if not ready or not proc.stderr.readline():
            proc.kill()
            raise RuntimeError(f"{argv} printed nothing within {READY_TIMEOUT} s")
    start = time.perf_counter()
    for _ in range(count // 256):
        proc.stdin.write(block)
    proc.stdin.close()
    proc.wait(300)
    elapsed = time.perf_counter() - start
    if ready_line:
        proc.stderr.close()
    return elapsed


def run(quick: bool = False) -> Path:
    rts, messages, repeats, times = (500, 20_000, 1, 1) if quick else (1_500, 200_000, 3, ROTATIONS)
    with tempfile.TemporaryDirectory(prefix="mcpbench-bench-") as tmp:
        trace = Path(tmp) / "bench.jsonl"
        # Two pairings rather than three servers in one rotation: the one after a recording tee
        # would pay for its recorder's last batch (measured: up to 10 µs on its p50).
        turns = rotations({"direct": ECHO, "tee": tee_argv(trace) + ECHO}, rts, times)
        copying = rotations({"direct": ECHO, "tee unrecorded": UNRECORDED + ECHO}, rts, times)
        baseline = rotations({"plain tee": PLAIN_TEE + ECHO, "tee": tee_argv(trace) + ECHO}, rts, times)
        direct, via_tee = (sum(turns[name], []) for name in ("direct", "tee"))
        flows = {"pipe": [], "tee": []}
        for _ in range(repeats):  # alternate, so drift in machine load hits both alike
            flows["pipe"].append(one_way(SINK, messages))
            flows["tee"].append(one_way(tee_argv(trace) + SINK, messages, ready_line=True))
            trace_bytes = os.path.getsize(trace)
    rt = {"direct_us": summary(direct), "tee_unrecorded_us": summary(sum(copying["tee unrecorded"], [])), "tee_us": summary(via_tee)}
    rt["added_p50_us"] = paired_added_p50(turns["direct"], turns["tee"])
    rt["added_p50_pooled_us"] = rt["tee_us"]["p50"] - rt["direct_us"]["p50"]
    # The same tee copying without recording: how much of the cost is the copy itself.
    rt["unrecorded_added_p50_us"] = paired_added_p50(copying["direct"], copying["tee unrecorded"])
    rt["added_p99_us"] = rt["tee_us"]["p99"] - rt["direct_us"]["p99"]
    rt["ratio_p50"] = rt["tee_us"]["p50"] / rt["direct_us"]["p50"]
    rt["round_trips_per_s"] = {"direct": 1e6 / rt["direct_us"]["mean"], "tee": 1e6 / rt["tee_us"]["mean"]}
    # Sequential round trips against the plain tee, from their own rotation: mean-based (a rate).
    plain, tee_again = (sum(baseline[name], []) for name in ("plain tee", "tee"))
    rt["vs_plain_tee"] = {
        "plain_tee_us": summary(plain),
        "tee_us": summary(tee_again),
    }
    means = rt["vs_plain_tee"]["plain_tee_us"]["mean"], rt["vs_plain_tee"]["tee_us"]["mean"]
    rt["vs_plain_tee"]["round_trips_per_s"] = {"plain tee": 1e6 / means[0], "tee": 1e6 / means[1]}
    rt["vs_plain_tee"]["ratio"] = means[0] / means[1]
    # The same per pair of back-to-back turns, then the median: a slow spell of this shared machine
    # (other processes' load) then cancels out instead of landing on one side (see paired_added_p50).
    rt["vs_plain_tee"]["paired_ratio"] = statistics.median(
        statistics.fmean(a) / statistics.fmean(b) for a, b in zip(baseline["plain tee"], baseline["tee"], strict=True)
    )
    throughput = {}
    for name, seconds in flows.items():
        best = sorted(seconds)[len(seconds) // 2]  # median of the repeats
        throughput[name] = {"messages_per_s": messages / best, "mb_per_s": messages * MESSAGE_SIZE / best / 1e6, "seconds": seconds}
    throughput["tee_vs_pipe"] = throughput["tee"]["messages_per_s"] / throughput["pipe"]["messages_per_s"]
    data = {
        "round_trip": rt,
        "one_way": throughput,
        "settings": {"round_trips": rts * times, "rotations": times, "messages": messages, "message_bytes": MESSAGE_SIZE, "repeats": repeats, "trace_bytes_last": trace_bytes},
        "targets": {"added_p50_us_max": 50, "added_p99_us_max": 200, "vs_plain_tee_min": 1.0, "tee_messages_per_s_min": 100_000},
        "met": {
            "added_p50": rt["added_p50_us"] <= 50,
            "added_p99": rt["added_p99_us"] <= 200,
            "vs_plain_tee": rt["vs_plain_tee"]["paired_ratio"] >= 1.0,
            "throughput": throughput["tee"]["messages_per_s"] >= 100_000,
        },
    }
    path = write_result("tee", data)
    _chart(path.with_suffix(".png"), rt, throughput)
    return path


def _chart(path: Path, rt: dict, throughput: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
    runs = {
        "direct": rt["direct_us"], "plain tee": rt["vs_plain_tee"]["plain_tee_us"],
        "tee, not recording": rt["tee_unrecorded_us"], "tee": rt["tee_us"],
    }
    labels = list(runs)
    p50 = [run["p50"] for run in runs.values()]
    p99 = [run["p99"] for run in runs.values()]
    x = range(len(runs))
    left.bar([i - 0.2 for i in x], p50, 0.4, label="p50")
    left.bar([i + 0.2 for i in x], p99, 0.4, label="p99")
    left.set_xticks(list(x), labels, fontsize=8)
    left.set_ylabel("µs per round trip")
    left.set_title("Round trip latency")
    left.legend()
    bars = right.bar(["pipe", "tee"], [throughput["pipe"]["messages_per_s"] / 1000, throughput["tee"]["messages_per_s"] / 1000])
    right.bar_label(bars, fmt="%.0f")
    right.margins(y=0.12)  # room above the taller bar for its label
    right.set_ylabel("thousand 1 KiB messages/s")
    right.set_title("One-way throughput")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
