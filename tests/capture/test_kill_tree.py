"""Nothing that crossed a recorder is lost when its whole process tree is killed with SIGKILL.

A host killing its process group, or the OOM killer, takes the tee, its recorder and the server
at once, right after the last answer went out. Every message the client saw must be in the trace
(read back with the trace reader, as every command does, which decodes what the recorder had not
written from the spool the tee left), in every try; `trace finish` then writes it complete.
"""

import http.client
import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from mcpbench.protocol.sse import SseEvent, SseParser
from mcpbench.trace import TraceReader
from mcpbench.trace.spool import finish, spool_path
from tests.record.helpers import mitmdump, record_proxy
from tests.support.processes import children, wait_for_exit
from tests.support.servers import HOST

pytestmark = pytest.mark.slow  # seconds each: `./dev test -m "not slow"` leaves them out

TEE = [sys.executable, "-m", "mcpbench", "tee"]
TRIES = 20  # the measure: every message kept in 20 of 20 tries, for each recorder
REQUESTS = 5
CROSSED = 2 * (REQUESTS + 1) + 1  # an HTTP session's messages: requests and their answers, and `initialized`
WAIT = 60.0  # a bound for any one wait; never a timing assertion


def kill_tree(pids: list[int]) -> None:
    """SIGKILL every process group and process in `pids` back to back, then wait until all are gone."""
    for pid in pids:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for pid in pids:
        wait_for_exit(pid, WAIT)


def recorded(trace: Path) -> tuple[list[dict], str | None]:
    reader = TraceReader(trace)
    return [e for e in reader if e["kind"] == "message"], reader.torn


def test_tee_tree_killed_right_after_the_last_answer(tmp_path: Path) -> None:
    kept = []
    for attempt in range(TRIES):
        trace = tmp_path / f"{attempt}.jsonl"
        proc = subprocess.Popen(
            TEE + ["--out", str(trace), "--", "cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
        )
        try:
            tree = []
            for n in range(REQUESTS):
                line = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"}}\n' % n
                proc.stdin.write(line)
                proc.stdin.flush()
                assert proc.stdout.readline() == line  # `cat` answers with the request itself
                if n == 0:
                    tree = [proc.pid, *children(proc.pid)]  # the recorder, and cat in its own group
            kill_tree(tree)  # right after the last answer
        finally:
            proc.kill()
            proc.wait()
            proc.stdin.close()
            proc.stdout.close()
        messages, torn = recorded(trace)
        both = [sum(1 for e in messages if e["dir"] == d) for d in ("c2s", "s2c")]
        kept.append(sum(both))
        # All that crossed is there; only a torn last line may be missing.
        assert both == [REQUESTS, REQUESTS] or (torn and sum(both) == 2 * REQUESTS - 1), (attempt, both, torn)
        assert [e["msg"]["id"] for e in messages if e["dir"] == "s2c"][:REQUESTS] == list(range(REQUESTS))[: both[1]]
        finish(trace)  # the explicit step: the trace written as it was read, the spool removed
        assert not spool_path(trace).exists()
        assert recorded(trace) == (messages, torn)
    assert kept == [2 * REQUESTS] * TRIES


def post(conn: http.client.HTTPConnection, path: str, message: dict, headers: dict, *, last: bool = False) -> tuple[dict, bytes]:
    """POST `message`: its answer's headers and its JSON-RPC answer (b"" for a bare status).

    An SSE answer is read event by event, up to the event that carries the answer; `last`: left
    there, its stream's end unread (the caller kills the recorder at once), else read to its end.
    """
    conn.request("POST", path, orjson.dumps(message), {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers})
    response = conn.getresponse()
    head = {name.lower(): value for name, value in response.getheaders()}
    if "text/event-stream" not in head.get("content-type", ""):
        return head, response.read()
    parser = SseParser()
    while chunk := response.read1(65536):
        for event in parser.feed(chunk):
            if type(event) is SseEvent and event.data and orjson.loads(event.data).get("id") == message.get("id"):
                if not last:
                    response.read()  # the stream's end, so the connection carries the next request
                return head, event.data.encode()
    raise AssertionError(f"the SSE answer to {message} ended without it")


def session(url: str) -> tuple[int, http.client.HTTPConnection]:
    """A handshake and calls against `url` (SSE answers): the messages that crossed, and the connection.

    The last answer's event is read and nothing after it: the caller kills the recorder's tree then,
    while the recorder may still be handling the chunk that carried it.
    """
    parts = url.split("/", 3)
    conn = http.client.HTTPConnection(parts[2], timeout=WAIT)
    path = "/" + parts[3]
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    headers, body = post(conn, path, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, {})
    assert b'"result"' in body
    ids = {"mcp-session-id": headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    post(conn, path, {"jsonrpc": "2.0", "method": "notifications/initialized"}, ids)
    for n in range(1, REQUESTS + 1):
        call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": str(n)}}}
        _, body = post(conn, path, call, ids, last=n == REQUESTS)
        assert b'"result"' in body
    return CROSSED, conn


def http_try(trace: Path, start) -> int:
    """One killed HTTP recording: the messages the trace kept (all that crossed, or all but a torn last line)."""
    with start(trace) as (url, proc):
        crossed, conn = session(url)
        kill_tree([proc.pid])  # at once after the client read the last answer's event
        conn.close()
    messages, torn = recorded(trace)
    return len(messages) if len(messages) == crossed or (torn and len(messages) == crossed - 1) else -len(messages)


def test_mcpbench_record_killed_right_after_the_last_answer(tmp_path: Path, http_server) -> None:
    upstream = f"http://{HOST}:{http_server.port}/mcp"
    kept = [http_try(tmp_path / f"{n}.jsonl", lambda trace: record_proxy(upstream, trace, start_new_session=True)) for n in range(TRIES)]
    # every try kept every message, not even a last line torn
    assert kept == [CROSSED] * TRIES, f"{sum(k != CROSSED for k in kept)} of {TRIES} tries lost a message: {kept}"


def test_mitmdump_with_the_addon_killed_right_after_the_last_answer(tmp_path: Path, http_server) -> None:
    import contextlib

    @contextlib.contextmanager
    def start(trace):
        with mitmdump(http_server.port, trace, start_new_session=True) as proxy:
            yield proxy.url("/mcp"), proxy.proc

    kept = [http_try(tmp_path / f"{n}.jsonl", start) for n in range(TRIES)]
    # every try kept every message, not even a last line torn
    assert kept == [CROSSED] * TRIES, f"{sum(k != CROSSED for k in kept)} of {TRIES} tries lost a message: {kept}"
