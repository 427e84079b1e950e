"""`mcpbench faults stdio`: the wrapped server is killed after N messages or at a time; bytes pass untouched."""

import json
import os
import subprocess
import sys
import threading

import pytest

from mcpbench.proxies import stdio_faults
from mcpbench.proxies.stdio_faults import Killer
from tests.support.faults import fault_records, read_first_line
from tests.support.servers import REPO_ROOT, serve_argv

WAIT = 60.0  # the server is a fresh Python importing the SDK, on a busy machine
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "faults-test", "version": "1"}}}


def _wrapped(*options: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "mcpbench", "faults", "stdio", *options, "--", *serve_argv("stdio")],
        cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_killer_counts_messages_in_any_chunking_and_per_direction():
    stream = b'{"a":1}\n\n{"b":2}\r\n{"c"'
    for size in (1, 3, len(stream)):
        killer = Killer(3)
        hits = [killer.feed("to-server", stream[i : i + size]) for i in range(0, len(stream), size)]
        assert killer.seen == 2 and not any(hits)  # the blank line and the unfinished one are no messages
        assert killer.feed("from-server", b"{}\n")
    only = Killer(1, "from-server")
    assert not only.feed("to-server", b"{}\n") and only.feed("from-server", b"{}\n")


@pytest.mark.slow
def test_the_server_is_killed_after_n_messages(tmp_path):
    log = tmp_path / "faults.jsonl"
    proc = _wrapped("--kill-after-messages", "3", "--fault-log", str(log))
    try:
        proc.stdin.write(json.dumps(INITIALIZE) + "\n")
        proc.stdin.flush()
        answer = json.loads(read_first_line(proc, WAIT))  # message 2: the server's own answer, untouched
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "mcpbench-reference"
        proc.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')  # message 3
        proc.stdin.flush()
        assert proc.stdout.readline() == ""  # EOF: the server is gone, though our stdin is still open
        assert proc.wait(WAIT) == 128 + 9
    finally:
        proc.kill()
        proc.wait()
    (record,) = fault_records(log)
    assert record["kind"] == "kill" and record["messages"] == 3 and record["why"] == "after 3 messages"


@pytest.mark.slow
def test_the_server_is_killed_at_a_time(tmp_path):
    log = tmp_path / "faults.jsonl"
    proc = _wrapped("--kill-after", "1500ms", "--fault-log", str(log))
    try:
        assert proc.stdout.readline() == ""
        assert proc.wait(WAIT) == 128 + 9
    finally:
        proc.kill()
        proc.wait()
    # killed when the plan says, by the wrapper's own record (the cause, not a stopwatch in the test)
    assert [r["kind"] for r in fault_records(log)] == ["kill"] and fault_records(log)[0]["elapsed"] >= 1.5


def test_a_server_that_ends_by_itself_gives_its_status():
    proc = subprocess.run(
        [sys.executable, "-m", "mcpbench", "faults", "stdio", "--kill-after", "60s", "--", sys.executable, "-c",
         "import sys; sys.stdout.write(sys.stdin.read()); sys.exit(4)"],
        cwd=REPO_ROOT, input="not json\n{}\n", capture_output=True, text=True, timeout=WAIT,
    )
    assert proc.returncode == 4 and proc.stdout == "not json\n{}\n"


@pytest.mark.slow
def test_sigterm_is_passed_to_the_server():
    import signal

    proc = _wrapped("--kill-after", "60s")
    try:
        proc.stdin.write(json.dumps(INITIALIZE) + "\n")
        proc.stdin.flush()
        assert json.loads(read_first_line(proc, WAIT))["id"] == 1  # the server runs
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT) == 143 and proc.stdout.read() == ""
    finally:
        proc.kill()
        proc.wait()


def test_the_server_is_silenced_before_the_counted_message_reaches_it(monkeypatch):
    """However fast the server answers the message that completes the count, the answer does not get out
    before the kill: the server is silenced before that message is passed on, and from then on what it
    writes is read and dropped."""
    silenced, passed, kills = threading.Event(), [], []
    monkeypatch.setattr(stdio_faults, "write_all", lambda fd, data: passed.append((data, silenced.is_set())))

    def pump(direction: str, data: bytes, killer: Killer) -> None:
        source, writer = os.pipe()
        os.write(writer, data)
        os.close(writer)
        sink = os.open(os.devnull, os.O_WRONLY)  # (the to-server pump closes it: the client's EOF)
        stdio_faults._pump(source, sink, direction, killer, kills.append, silenced)
        os.close(source)
        if direction != "to-server":
            os.close(sink)

    pump("from-server", b'{"id":0}\n', Killer(1, "to-server"))  # not counted: passes, nobody silenced
    pump("to-server", b'{"id":1}\n', Killer(1, "to-server"))
    pump("from-server", b'{"id":1,"result":{}}\n', Killer(1, "to-server"))
    assert passed == [(b'{"id":0}\n', False), (b'{"id":1}\n', True)]
    assert kills == ["after 1 messages"]
