"""The probe's Streamable HTTP sessions and checks on the one transport interface, against `MockTransport`:
no server, no process, no socket."""

import time

import pytest

from mcpbench.probe.checks import results
from mcpbench.probe.target import ProbeSettings, ProbeTarget, reach
from mcpbench.probe.verdicts import FAIL, PASS
from mcpbench.probe.wire import ProbeOptions, Wire
from mcpbench.protocol.errors import TargetError
from mcpbench.protocol.http import Failure
from mcpbench.protocol.client import Pushed
from mcpbench.protocol.jsonrpc import ErrorResponse, Notification, Request, Response
from mcpbench.protocol.transports import STREAMABLE_HTTP
from mcpbench.protocol.versions import LATEST
from mcpbench.transport import CUT, MockTransport

URL = "http://mock.invalid/mcp"


class MockWire(Wire):
    """A wire whose sessions' transport is a `MockTransport` answering with `handler`."""

    def __init__(self, handler) -> None:
        super().__init__(URL, ProbeOptions(timeout=2.0))
        self.handler = handler

    def transport(self, sink):
        return MockTransport(self.handler, sink, kind=STREAMABLE_HTTP, url=self.url)


def handshake_server(tools=("echo",), version="2025-11-25"):
    def handle(message):
        if type(message) is not Request:
            return []
        if message.method == "initialize":
            return [Response(id=message.id, result={"protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "m"}})]
        if message.method == "tools/list":
            return [Response(id=message.id, result={"tools": [{"name": t} for t in tools]})]
        return [ErrorResponse(id=message.id, code=-32601, message="unknown method")]
    return handle


def deadline() -> float:
    return time.monotonic() + 2.0


def test_first_contact_finds_the_version_the_tools_and_the_session():
    wire = MockWire(handshake_server(tools=("echo", "slow")))
    target = reach(URL, wire, ProbeSettings(), deadline=deadline())
    assert target.version == "2025-11-25" and target.server == {"name": "m"}
    assert target.tools == ["echo", "slow"] and target.progress is not None  # the lab's progress tool, found
    assert target.keeps_sessions and target.streams and target.affinity


def test_first_contact_refused_names_the_url_as_not_mcp():
    def refuse(message):
        return [ErrorResponse(id=message.id, code=-32600, message="no")] if type(message) is Request else []
    with pytest.raises(TargetError, match=f"{URL} is not an MCP endpoint: initialize got .*JSON-RPC -32600 no"):
        reach(URL, MockWire(refuse), ProbeSettings(), deadline=deadline())


def test_a_call_cut_after_its_first_event_fails_with_the_stream_and_keeps_what_came():
    def slow(message):
        if type(message) is Request and message.method == "tools/call":
            token = message.params["_meta"]["progressToken"]
            progress = [Notification(method="notifications/progress", params={"progressToken": token, "progress": i})
                        for i in (1, 2)]
            return [*progress, Response(id=message.id, result={"content": []})]
        return handshake_server()(message)
    target = ProbeTarget(URL, STREAMABLE_HTTP, MockWire(slow), ProbeSettings())
    session = target.session()
    assert session.open(deadline=deadline()).ok
    ex = session.call("tools/call", {"name": "slow", "_meta": {"progressToken": "t"}}, deadline=deadline(), cut_after=1)
    assert ex.cut and ex.answered is None and ex.failed is not None and ex.failed.request.method == "tools/call"
    assert [e.message.params["progress"] for e in ex.messages(Pushed)] == [1]  # the second and the answer: never read
    assert ex.status == 200 and ex.reader is not None and ex.reader.answer.events == 1
    whole = session.call("tools/list", deadline=deadline())
    assert whole.ok and whole.result == {"tools": [{"name": "echo"}]} and not whole.cut


def test_a_stream_closed_before_its_answer_fails_the_call():
    def silent(message):
        if type(message) is Request and message.method == "tools/call":
            return [CUT]  # the stream closes before the answer
        return handshake_server()(message)
    session = ProbeTarget(URL, STREAMABLE_HTTP, MockWire(silent), ProbeSettings()).session()
    assert session.open(deadline=deadline()).ok
    ex = session.call("tools/call", {"name": "x"}, deadline=deadline())
    assert ex.answered is None and ex.failure() == (Failure.STREAM_CLOSED, "the answer stream closed without an answer") and ex.closed_at is not None


def newest_server(typed: bool):
    def handle(message):
        if type(message) is not Request:
            return []
        if message.method == "server/discover":
            return [Response(id=message.id, result={"supportedVersions": [LATEST], "resultType": "complete"})]
        result = {"ttlMs": 1000, "cacheScope": "public", **({"resultType": "complete"} if typed else {})}
        return [Response(id=message.id, result=result)]
    return handle


@pytest.mark.parametrize(("typed", "verdict"), [(True, PASS), (False, FAIL)])
def test_the_results_check_judges_a_mock_server_as_it_judges_a_real_one(typed, verdict):
    target = ProbeTarget(URL, STREAMABLE_HTTP, MockWire(newest_server(typed)), ProbeSettings())
    row = results.run(target, deadline())
    assert row.verdict == verdict and target.discovered["ok"]
    assert sorted(row.figures["results"]) == ["prompts/list", "resources/list", "resources/templates/list", "server/discover",
                                              "tools/list"]
