"""The load client (`McpClient`) against `MockTransport`: its steps and failures on both transports' shapes and
in both eras, with no server, process or socket (a function answers each message)."""

import pytest

from mcpbench.load.client import McpClient
from mcpbench.protocol.asks import Canned
from mcpbench.protocol.http import Failure
from mcpbench.protocol.jsonrpc import Notification, Request, Response
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.transport import CUT, MockTransport
from tests.support.load_client import Steps, in_session

OLD, NEW = "2025-11-25", "2026-07-28"
# Each transport's shape in each era it has: legacy HTTP+SSE is the 2024-11-05 transport.
CASES = [(STDIO, OLD), (STDIO, NEW), (STREAMABLE_HTTP, OLD), (STREAMABLE_HTTP, NEW), (LEGACY_SSE, "2024-11-05")]
RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}
ELICIT = {"method": "elicitation/create",
          "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}}}}
ACCEPTED = {"action": "accept", "content": {"answer": "yes"}}


def handshake(message):
    """The server's part of the handshake era's start (None for any other message)."""
    if type(message) is Request and message.method == "initialize":
        return [Response(id=message.id, result={"protocolVersion": message.params["protocolVersion"], "capabilities": {},
                                                 "serverInfo": {"name": "mock", "version": "1"}})]
    if type(message) is Notification:
        return []
    return None


def client_on(kind, version, tools, *, timeout=5.0, policy=None):
    """A client whose every transport is a mock of `kind`: `tools(message)` answers each request after the handshake."""
    steps, made = Steps(), []

    def server(message):
        said = handshake(message)
        return said if said is not None else tools(message)

    def make():
        made.append(MockTransport(server, kind=kind))
        return made[-1]

    client = McpClient(make, steps, request_type=kind, version=version, timeout=timeout, policy=policy)
    return client, steps, made


def named(steps, name):
    return [s for s in steps.fired if s["name"] == name]


@pytest.mark.parametrize(("kind", "version"), CASES)
def test_a_call_is_answered_and_reported_once(kind, version):
    client, steps, made = client_on(kind, version, lambda m: [Response(id=m.id, result=RESULT)])
    result, _ = in_session(client, steps, lambda: client.call_tool("echo", {"text": "hi"}))
    assert result == RESULT
    (call,) = named(steps, "tools/call echo")
    assert call["exception"] is None and call["request_type"] == kind
    methods = [m.method for m in made[0].sent if type(m) is not Response]
    assert methods == (["tools/call"] if version == NEW else ["initialize", "notifications/initialized", "tools/call"])
    if version == NEW:
        assert "_meta" in made[0].sent[0].params  # 2026-07-28: the envelope on every request, no handshake


@pytest.mark.parametrize(("kind", "version"), CASES)
def test_an_answer_that_never_comes_fails_the_call_when_its_time_runs_out(kind, version):
    client, steps, _ = client_on(kind, version, lambda m: [], timeout=0.3)
    result, _ = in_session(client, steps, lambda: client.call_tool("slow"))
    assert result is None
    (call,) = named(steps, "tools/call slow")
    assert call["exception"].kind == Failure.ANSWER_LOST and "no answer within 0.3 s" in call["exception"].detail


@pytest.mark.parametrize(("kind", "version"), CASES)
def test_a_stream_cut_before_the_answer_fails_the_call_as_closed(kind, version):
    progress = Notification(method="notifications/progress", params={"progressToken": 1, "progress": 1})
    client, steps, made = client_on(kind, version, lambda m: [progress, CUT])
    result, _ = in_session(client, steps, lambda: client.call_tool("cut"))
    assert result is None
    (call,) = named(steps, "tools/call cut")
    assert call["exception"].kind == Failure.STREAM_CLOSED
    if kind != STREAMABLE_HTTP:
        assert not made[0].alive  # the process or the stream is gone: a new session needs a new one


def test_a_server_request_inside_a_call_is_answered_before_the_call_completes():
    asked = Request(id="s1", method="roots/list", params={})

    def tools(message):
        if type(message) is Response:  # the client's reply to the server's request: now the answer
            assert message.id == "s1" and message.result["roots"][0]["name"] == "tmp"
            return [Response(id=held[0], result=RESULT)]
        held.append(message.id)
        return [asked]

    held: list = []
    policy = Canned({"roots/list": {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}})
    client, steps, made = client_on(STDIO, OLD, tools, policy=policy)
    result, _ = in_session(client, steps, lambda: client.call_tool("ask"))
    assert result == RESULT and named(steps, "tools/call ask")[0]["exception"] is None


@pytest.mark.parametrize("kind", [STDIO, STREAMABLE_HTTP])
def test_an_input_round_is_answered_and_the_call_sent_again_with_the_state_it_carried(kind):
    """2026-07-28: `input_required` with a request and a state; the retry carries the answer and the very state."""
    state = "v1.opaque\u00e9=="

    def tools(message):
        if "inputResponses" not in message.params:
            return [Response(id=message.id, result={"resultType": "input_required", "inputRequests": {"name": ELICIT},
                                                    "requestState": state})]
        assert message.params["inputResponses"] == {"name": ACCEPTED} and message.params["requestState"] == state
        return [Response(id=message.id, result={"resultType": "complete", **RESULT})]

    client, steps, made = client_on(kind, NEW, tools, policy=Canned({"elicitation/create": ACCEPTED}))
    result, _ = in_session(client, steps, lambda: client.operation("tools/call", {"name": "ask", "arguments": {}}))
    assert result["content"] == RESULT["content"]
    (step,) = named(steps, "tools/call ask")
    assert step["exception"] is None and step["context"]["rounds"] == 2
    first, again = made[0].sent
    assert first.id != again.id  # each round a new request id
