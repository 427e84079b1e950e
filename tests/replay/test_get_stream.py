"""Replay over Streamable HTTP opens the GET stream when the recording shows one."""

import threading

from mcpbench.replay import plan as plans
from mcpbench.replay.engine import Replayer
from mcpbench.replay.serve_trace import MockHttpServer, TraceAnswers
from mcpbench.system.target import parse_target
from tests.record.helpers import peer_server
from tests.replay.helpers import LIST_CHANGED, notify_trace
from tests.support.servers import HOST

# Per request: far above a loopback call, short enough to fail fast.
TIMEOUT = 10.0


def test_a_recorded_get_stream_is_opened_and_its_messages_delivered(tmp_path):
    recorded = plans.load(notify_trace(tmp_path / "notify.jsonl"))
    assert recorded.sessions[0].listens
    with peer_server() as peer:
        run = Replayer(parse_target(f"http://{HOST}:{peer.port}/mcp"), timeout=TIMEOUT).run(recorded)
    session = run.sessions[0]
    assert not session.aborted, session.aborted
    assert session.calls[-1].answer.result["content"][0]["text"] == "sent"
    assert [note["method"] for note in session.notifications] == [LIST_CHANGED]


def test_a_server_without_a_get_stream_answers_405_and_that_is_no_failure(tmp_path):
    recorded = plans.load(notify_trace(tmp_path / "notify.jsonl"))
    server = MockHttpServer(TraceAnswers(recorded), transport="streamable-http")  # GET: 405
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        run = Replayer(parse_target(server.url), timeout=TIMEOUT).run(recorded)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(TIMEOUT)
    session = run.sessions[0]
    assert not session.aborted and not session.notes, (session.aborted, session.notes)
    assert all(live.answer is not None and live.failure is None for live in session.calls)
    assert session.notifications == []  # the mock has no GET stream: nothing outside calls
