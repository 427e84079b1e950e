"""`lab up` with faults and restarts: the balancer injects, instances restart on their ports, all is logged."""

import signal
import subprocess
import sys
import time

import pytest

from mcpbench.lab.topology.cluster import RestartPlan, running_lab
from tests.support.faults import connection, fault_records, initialize, post, read_until_closed, start_stream_get, wait_for
from tests.support.processes import alive, descendants, wait_for_lines

pytestmark = pytest.mark.slow  # seconds each: `./dev test -m "not slow"` leaves them out

RESTART_AT = 5.0  # seconds: far longer than a handshake through the lab, even on a busy machine
WAIT = 90.0


def test_after_a_restart_an_old_session_gets_404_and_a_new_one_works(tmp_path):
    with running_lab(2, "streamable-http", policy="sticky", folder=tmp_path, restarts=RestartPlan(at=RESTART_AT),
                     faults={"cut_streams_after": "2s"}) as lab:
        old_pid, port = lab.instances[0].proc.pid, lab.instances[0].port
        sessions = []
        for _ in range(2):  # sticky, round-robin for new sessions: one on s1, one on s2
            headers = initialize(lab.url)
            sessions.append(headers)
        created = time.time()
        conn, stream = start_stream_get(lab.url, sessions[0])
        instance = stream.getheader("x-mcpbench-instance")
        _, cut = read_until_closed(stream)  # the balancer's fault addon cuts it
        conn.close()
        assert cut
        records = wait_for(lambda: [r for r in fault_records(lab.fault_log) if r.get("phase") == "up"] or None,
                           timeout=WAIT, what="the restart")
        assert lab.instances[0].port == port and lab.instances[0].proc.pid != old_pid
        statuses = {}
        for headers in sessions:
            conn = connection(lab.url)
            answer = post(conn, "/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers)
            answer.read()
            statuses[answer.getheader("x-mcpbench-instance")] = answer.status
            conn.close()
        assert statuses == {"s1": 404, "s2": 200}  # s1's sessions are gone, s2's are kept
        assert initialize(lab.url)["mcp-session-id"]  # the restarted lab takes new sessions
    log = fault_records(tmp_path / "faults.jsonl")
    killed = next(r for r in log if r.get("phase") == "killed")
    assert killed["instance"] == "s1" and killed["t"] > created and records[0]["down_s"] > 0
    assert [r["kind"] for r in log].count("cut-stream") == 1 and instance in ("s1", "s2")


def test_lab_up_restarts_every_t_and_leaves_no_process_behind(tmp_path):
    log = tmp_path / "f.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpbench", "lab", "up", "--instances", "2", "--restart-every", "1s",
         "--drop", "10%", "--drop-as", "503", "--seed", "1", "--fault-log", str(log)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        lines = wait_for_lines(proc, 4, WAIT)
        assert lines[3] == f"  fault log: {log}"
        ups = wait_for(lambda: [r for r in fault_records(log) if r.get("phase") == "up"][2:] or None,
                       timeout=WAIT, what="three restarts")
        assert proc.poll() is None  # a restarted instance is no dead process: the lab runs on
        kids = descendants(proc.pid)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(WAIT) == 130
        assert not [pid for pid in kids if alive(pid)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    names = [r["instance"] for r in fault_records(log) if r.get("phase") == "killed"]
    assert names[:3] == ["s1", "s2", "s1"] and len(ups) >= 1
