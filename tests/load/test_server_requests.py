"""Load users answer server→client requests by the scenario's policy, the same way on every transport.

The load client (`McpClient` over the client core and a gevent transport) runs here in a greenlet,
outside Locust, against the reference server's `ask` tool, which puts a sampling request to the
client during the call when the client declared sampling.
"""

import gevent
import gevent.event
import pytest

from mcpbench.load.client import McpClient
from mcpbench.transport.green import transport_for
from mcpbench.protocol.asks import Canned
from mcpbench.system.target import Target
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from tests.support.load_client import TIMEOUT, Steps, in_session
from tests.support.servers import serve_argv

SAMPLING = {"role": "assistant", "content": {"type": "text", "text": "canned by the scenario"}, "model": "mcpbench"}


def ask_once(target: Target, policy: Canned) -> tuple[object, Steps]:
    steps = Steps()
    client = McpClient(lambda: transport_for(target, timeout=TIMEOUT), steps, request_type=target.transport,
                       version="2025-11-25", timeout=TIMEOUT, policy=policy)
    return in_session(client, steps, lambda: client.call_tool("ask", {"question": "which model?"}))


@pytest.fixture(scope="module", params=[STDIO, LEGACY_SSE, STREAMABLE_HTTP])
def target(request):
    """The reference server on each transport: a stdio command, or the session's HTTP server (tests/conftest.py)."""
    if request.param == STDIO:
        return Target(STDIO, argv=tuple(serve_argv("stdio")))
    server = request.getfixturevalue({LEGACY_SSE: "sse_server", STREAMABLE_HTTP: "http_server"}[request.param])
    return Target(request.param, url=server.url)


def text_of(result) -> str:
    assert isinstance(result, dict), result
    return "".join(block.get("text", "") for block in result["content"])


def test_a_canned_sampling_answer_reaches_the_tool_on_every_transport(target):
    result, steps = ask_once(target, Canned({"sampling/createMessage": SAMPLING}))
    assert text_of(result) == "canned by the scenario"
    assert [s["exception"] for s in steps.fired if s["name"] == "tools/call ask"] == [None]


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_a_refusing_policy_declares_nothing_and_the_server_says_so(target):
    from mcpbench.lab.peers.reference_server import ASK_NEITHER_TEXT

    result, _ = ask_once(target, Canned({"sampling/createMessage": None}))
    assert text_of(result) == ASK_NEITHER_TEXT


# --- 2026-07-28: the input a server asks for in a result, answered by the same policy --------------------

NEWEST = "2026-07-28"
# A think time the operation waits before its answer (the client's wait in the sample): exact, as asked.
THINK = 0.05


def operate_once(target: Target, policy: Canned, *, max_rounds: int = 10) -> tuple[object, Steps]:
    """One `ask` call of the newest protocol as a whole operation (`McpClient.operation`)."""
    steps = Steps()
    client = McpClient(lambda: transport_for(target, timeout=TIMEOUT), steps, request_type=target.transport,
                       version=NEWEST, timeout=TIMEOUT, policy=policy, max_rounds=max_rounds, answer_think=(THINK, THINK))
    return in_session(client, steps, lambda: client.operation("tools/call", {"name": "ask", "arguments": {"question": "which model?"}}))


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_an_input_round_is_answered_and_the_step_is_the_whole_operation(target):
    result, steps = operate_once(target, Canned({"sampling/createMessage": SAMPLING}))
    assert text_of(result) == "canned by the scenario"
    (step,) = [s for s in steps.fired if s["name"] == "tools/call ask"]
    context = step["context"]
    assert step["exception"] is None
    assert context["rounds"] == 2 and len(context["rounds_ms"]) == 2 and context["polls"] == 0
    assert context["wait"] == pytest.approx(THINK * 1000.0)  # the user's think time before the answer
    assert context["asked"] == ["sampling/createMessage"]


def test_an_elicitation_declined_reaches_the_tool(http_server):
    result, _ = operate_once(Target(STREAMABLE_HTTP, url=http_server.url), Canned({"elicitation/create": {"action": "decline"}}))
    assert text_of(result) == "(the user chose decline)"


def test_a_server_asking_past_the_round_bound_is_classed(http_server):
    target = Target(STREAMABLE_HTTP, url=http_server.url)
    result, steps = operate_once(target, Canned({"sampling/createMessage": SAMPLING}), max_rounds=0)
    (step,) = [s for s in steps.fired if s["name"] == "tools/call ask"]
    assert result is None and step["context"]["failure"] == "input-rounds-exceeded"
    assert step["context"]["rounds"] == 1


# --- 2026-07-28: a session's listen stream ---------------------------------------------------------------


class Counted(Steps):
    """Steps, with an event set once `want` steps named `name` have fired."""

    def __init__(self, name: str, want: int) -> None:
        super().__init__()
        self.name, self.want, self.reached = name, want, gevent.event.Event()

    def fire(self, **kw) -> None:
        super().fire(**kw)
        if sum(s["name"] == self.name for s in self.fired) >= self.want:
            self.reached.set()


def test_a_listen_stream_is_acknowledged_brings_each_change_and_ends_with_the_session(target):
    change = "listen notifications/tools/list_changed"
    steps = Counted(change, 2)
    # discover: the listen stream opens once the server has answered (stdio: once its process is up), so
    # its acknowledgement's bound (5 s) does not include the start of a server process on a busy machine
    client = McpClient(lambda: transport_for(target, timeout=TIMEOUT), steps, request_type=target.transport,
                       version=NEWEST, timeout=TIMEOUT, listen_for=(("toolsListChanged",), ()), discover=True)

    def body():
        assert client._acked.wait(TIMEOUT), "the listen stream was not acknowledged"
        for _ in range(2):  # twice: the session's shared server gets its tool list back
            client.call_tool("toggle_tool")
        return steps.reached.wait(TIMEOUT)

    reached, _ = in_session(client, steps, body)
    assert reached, steps.fired
    (listened,) = [s for s in steps.fired if s["name"] == "subscriptions/listen"]
    assert listened["exception"] is None and listened["context"]["changes"] == 2
    assert [s["exception"] for s in steps.fired if s["name"] == change] == [None, None]


class ListenPeer:
    """A 2026-07-28 Streamable HTTP peer of the test's own that answers `subscriptions/listen` badly:
    "silent" holds the stream open and never acknowledges, "cut" acknowledges and then closes it."""

    def __init__(self, mode: str) -> None:
        import threading

        self.mode, self.release = mode, threading.Event()

    def handler(self):
        import json
        from http.server import BaseHTTPRequestHandler

        peer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["content-length"])))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                if peer.mode == "cut":
                    ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                           "params": {"notifications": {"toolsListChanged": True},
                                      "_meta": {"io.modelcontextprotocol/subscriptionId": request["id"]}}}
                    self.wfile.write(b"data: " + json.dumps(ack).encode() + b"\n\n")
                    self.wfile.flush()
                    return  # HTTP/1.0: the stream ends with the connection, without the listen request's answer
                peer.release.wait(TIMEOUT)

        return Handler


@pytest.mark.parametrize("mode, said", [("silent", "not acknowledged within 0.3 s"), ("cut", "broke after 0 changes")])
def test_a_listen_stream_unacknowledged_or_cut_is_listen_dropped(monkeypatch, mode, said):
    from tests.support.http_thread import serving

    monkeypatch.setattr("mcpbench.load.client.ACK_TIMEOUT", 0.3)
    peer = ListenPeer(mode)
    steps = Counted("subscriptions/listen", 1)
    with serving(peer.handler()) as port:
        target = Target(STREAMABLE_HTTP, url=f"http://127.0.0.1:{port}/mcp")
        client = McpClient(lambda: transport_for(target, timeout=TIMEOUT), steps, request_type=target.transport,
                           version=NEWEST, timeout=TIMEOUT, listen_for=(("toolsListChanged",), ()))
        try:
            _, _ = in_session(client, steps, lambda: steps.reached.wait(TIMEOUT))
        finally:
            peer.release.set()
    (listened,) = [s for s in steps.fired if s["name"] == "subscriptions/listen"]
    assert listened["context"]["failure"] == "listen-dropped" and said in str(listened["exception"]), listened


# --- tasks: the lab's task tool (`lab serve --tasks`, `work`) ------------------------------------------


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.parametrize("version", ["2025-11-25", NEWEST])
def test_a_task_is_polled_to_its_result_and_one_given_up_on_is_cancelled(version):
    from mcpbench.protocol.operation import TASK_CAPABILITIES
    from tests.support.servers import serve_argv

    target = Target(STDIO, argv=tuple(serve_argv("stdio", extra_args=["--tasks"])))

    steps = Steps()
    client = McpClient(lambda: transport_for(target, timeout=TIMEOUT), steps, request_type=STDIO, version=version,
                       timeout=TIMEOUT, capabilities=TASK_CAPABILITIES if version == NEWEST else None)

    def body():
        done = client.operation("tools/call", {"name": "work", "arguments": {"ms": 50}}, as_task=True)
        client.timeout = 1.0  # the next step's bound: its task outlives it
        given_up = client.operation("tools/call", {"name": "work", "arguments": {"ms": 60_000}}, as_task=True)
        return done, given_up

    (done, given_up), _ = in_session(client, steps, body)
    assert text_of(done) == "worked 50 ms"
    first, second = [s for s in steps.fired if s["name"] == "tools/call work"]
    assert first["exception"] is None and first["context"]["polls"] >= 1 and first["context"]["rounds"] == 1
    assert given_up is None and second["context"]["failure"] == "answer-lost/timeout"
    assert "its task still working" in str(second["exception"]) and "the task cancelled" in str(second["exception"])
