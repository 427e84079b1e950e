"""Samples in transit from workers to the master, the rate split, the run's locustfile and the master
probe: the parts of a distributed load run that need no Locust process."""

import re
import socket
import subprocess
import sys
import threading

import orjson
import pytest

from mcpbench.load.openmodel import ArrivalSchedule
from mcpbench.load.runfile import runfile_text
from mcpbench.load.runner import parse_bind
from mcpbench.load.transit import OPEN, RECONNECT, LineBatch, Outbox, Roster, WorkerDone, rate_shares
from mcpbench.load.worker import MasterError, probe_master
from tests.load.helpers import scenario_from_text


def line(i: int) -> bytes:
    return orjson.dumps({"t": i, "step": "tools/call echo"}) + b"\n"


def test_batches_are_whole_until_the_flush_and_keep_every_line_in_order():
    box = Outbox(batch_lines=3, window=10)
    for i in range(7):
        assert box.add(line(i))
    assert box.full_batch()
    first, second = box.take(), box.take()
    assert box.take() is None  # one line waits: not a whole batch
    last = box.take(partial=True)
    assert [(b.seq, b.first, b.lines) for b in (first, second, last)] == [(0, 0, 3), (1, 3, 3), (2, 6, 1)]
    data = b"".join(b.data for b in (first, second, last))
    assert data == b"".join(line(i) for i in range(7))
    assert box.sent == 7 and box.waiting == 0


def test_the_window_holds_batches_until_the_master_acknowledges():
    box = Outbox(batch_lines=1, window=2)
    for i in range(5):
        box.add(line(i))
    assert [box.take().seq, box.take().seq] == [0, 1]
    assert box.take() is None and box.in_flight == 2 and not box.full_batch()  # back-pressure
    box.acked(0)
    assert box.take().seq == 2 and box.take() is None
    box.acked(2)  # acknowledging a later batch acknowledges the ones before it
    assert box.in_flight == 0


def test_a_full_buffer_drops_and_counts_and_the_end_sends_the_rest_whatever_the_window():
    one = len(line(0))
    box = Outbox(batch_lines=2, window=1, max_buffered=3 * one)
    kept = [box.add(line(i)) for i in range(5)]
    assert kept == [True, True, True, False, False] and box.dropped == 2
    assert box.take() is not None and box.take(partial=True) is None  # window full
    box.add(b'{"reconnect": {}}\n', RECONNECT)
    box.add(b'{"open": {}}\n', OPEN)
    batches, done = box.finish(round=3)
    assert sum(b.lines for b in batches) == 3 and box.waiting == 0
    assert done == WorkerDone(round=3, sent=5, dropped=2, kinds={"samples": 3, RECONNECT: 1, OPEN: 1})
    assert WorkerDone.from_message(done.to_message()) == done
    assert LineBatch.from_message(batches[0].to_message()) == batches[0]


def test_the_roster_counts_what_arrived_against_what_each_worker_sent():
    roster = Roster()
    roster.join("a", host="h1", pid=1, index=0)
    roster.join("b", host="h2", pid=2, index=1)
    roster.received("a", LineBatch(seq=0, first=0, lines=3, data=b""))
    roster.received("a", LineBatch(seq=2, first=5, lines=2, data=b""))  # batch 1 (lines 3-4) never came
    roster.received("b", LineBatch(seq=0, first=0, lines=4, data=b""))
    assert roster.waiting({"a", "b"}, round=1) == {"a", "b"}
    roster.done("a", WorkerDone(round=1, sent=9, dropped=1))
    assert roster.waiting({"a", "b"}, round=1) == {"b"}
    assert roster.waiting({"a"}, round=1) == set()  # b is gone: nobody to wait for
    out = roster.to_json()
    assert out["samples_per_worker"]["a"] | {} == {
        "host": "h1", "pid": 1, "index": 0, "received": 5, "sent": 9, "dropped": 1, "lost_in_transit": 4, "finished": True,
    }
    assert out["samples_per_worker"]["b"]["finished"] is False and out["samples_per_worker"]["b"]["lost_in_transit"] == 0
    assert out["samples_lost"] == {"dropped": 1, "in_transit": 4}
    assert out["workers_died"] == ["b"]
    assert list(out["samples_per_worker"]) == ["a", "b"]  # in the master's order of joining


def test_the_rate_is_split_over_the_workers_present_and_retimed_from_the_next_slot():
    assert rate_shares(90.0, {"a", "b", "c"}) == {"a": 30.0, "b": 30.0, "c": 30.0}
    assert rate_shares(90.0, set()) == {}
    now = [100.0]
    schedule = ArrivalSchedule(10.0, max_lateness=5.0, clock=lambda: now[0])
    assert [schedule.claim().intended for _ in range(3)] == [100.0, 100.1, pytest.approx(100.2)]
    schedule.retime(20.0)  # a worker left: this one's share doubles
    assert [schedule.claim().intended for _ in range(3)] == [pytest.approx(100.3), pytest.approx(100.35), pytest.approx(100.4)]
    assert schedule.claim().index == 6 and schedule.stats()["rate"] == 20.0
    with pytest.raises(ValueError):
        schedule.retime(0)


@pytest.mark.parametrize(("text", "expected"), [
    ("10.0.0.1:6000", ("10.0.0.1", 6000)), (":6000", ("0.0.0.0", 6000)), ("master.local", ("master.local", 5557)),
    ("[::1]:6000", ("::1", 6000)), ("[::]", ("::", 5557)),
])
def test_master_bind_addresses(text, expected):
    assert parse_bind(text) == expected


@pytest.mark.parametrize("text", ["h:99999", "h:port", "[::1]x", "h:0"])
def test_bad_master_bind_addresses(text):
    with pytest.raises(ValueError):
        parse_bind(text)


def test_the_run_file_carries_the_scenario_whole_and_refuses_another_version(tmp_path):
    scenario = scenario_from_text(
        "target: http://127.0.0.1:9/mcp?api_key=k\nmix:\n  - call: tools/call\n    tool: echo\n    arguments: {text: \"{{string 8}}\"}\n"
        "open_model: {rate: 30}\n", "s.yaml",
    )
    text = runfile_text(scenario, workers=3, version="0.0.0-other")
    assert "api_key=k" in text and "{{string 8}}" in text  # the target as given, the template unexpanded
    path = tmp_path / "mcpbench_run.py"
    path.write_text(text)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        f"this worker runs mcpbench {__import__('mcpbench').__version__}, the master 0.0.0-other: install the master's version on every machine"
    ]


class _Listener:
    """A TCP server on 127.0.0.1 that sends `greeting` to whoever connects."""

    def __init__(self, greeting: bytes) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.greeting = greeting
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.sendall(self.greeting)
            try:
                conn.recv(1)  # until the probe hangs up
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()
        self.thread.join(5)


@pytest.mark.parametrize(("greeting", "expected"), [
    (b"\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f\x03", None),  # ZMTP 3's signature: a Locust master
    (b"SSH-2.0-OpenSSH_9.6\r\n", "is not a Locust master (it answered b'SSH-2.0-Op')"),
])
def test_the_probe_tells_a_master_from_anything_else(greeting, expected):
    listener = _Listener(greeting)
    try:
        if expected is None:
            probe_master("127.0.0.1", listener.port, wait=1.0)
        else:
            with pytest.raises(MasterError, match=re.escape(expected)):
                probe_master("127.0.0.1", listener.port, wait=1.0)
    finally:
        listener.close()


def test_the_probe_names_a_port_where_nothing_listens():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(MasterError, match=f"no master at 127.0.0.1:{port} within 0.6 s: Connection refused"):
            probe_master("127.0.0.1", port, wait=0.6)
