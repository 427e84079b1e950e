"""The load client over a live session: a call that timed out leaves the next ones their own time, calls
that together take longer than one call's bound each get the whole bound, and a session can hold its GET
stream open."""

import re

import gevent
import pytest

from mcpbench.load.client import McpClient
from mcpbench.transport.green import transport_for
from mcpbench.protocol.http import Failure
from mcpbench.system.target import Target
from mcpbench.protocol.transports import STREAMABLE_HTTP

# A step's bound in these tests (seconds), and the greenlet's.
TIMEOUT = 1.0
BOUND = 30.0


class Steps:
    def __init__(self) -> None:
        self.fired: list[dict] = []

    def fire(self, **kw) -> None:
        self.fired.append(kw)

    def outcomes(self, name: str) -> list[str | None]:
        return [(step["context"] or {}).get("failure") for step in self.fired if step["name"] == name]


def run(client: McpClient, body):
    def guarded():
        try:
            assert client.start_session()
            return body()
        finally:
            client.end_session()
            client.close_transport()

    greenlet = gevent.spawn(guarded)
    greenlet.join(timeout=BOUND)
    assert greenlet.ready(), "the client did not finish"
    if greenlet.exception is not None:
        raise greenlet.exception
    return greenlet.value


def test_calls_after_a_timed_out_one_get_their_own_time(http_server):
    steps = Steps()
    target = Target(STREAMABLE_HTTP, url=http_server.url)
    client = McpClient(lambda: transport_for(target, timeout=10.0), steps, request_type=STREAMABLE_HTTP, timeout=TIMEOUT)

    def body():
        client.call_tool("slow", {"seconds": 3 * TIMEOUT, "steps": 1})  # times out
        return [client.call_tool("echo", {"text": str(n)}) for n in range(3)]

    answers = run(client, body)
    assert steps.outcomes("tools/call slow") == [Failure.ANSWER_LOST]
    assert steps.outcomes("tools/call echo") == [None, None, None], answers  # a fired timer used to fail them at once
    [slow] = [step for step in steps.fired if step["name"] == "tools/call slow"]
    said = re.fullmatch(rf"{Failure.ANSWER_LOST}: no answer within 1 s \(waited (\d+) s\)", str(slow["exception"]))
    assert said and int(said[1]) >= 1, slow["exception"]  # how long it waited: a bound cut short would show


@pytest.mark.slow
def test_each_call_gets_the_whole_bound_however_long_the_calls_before_it_took(http_server):
    # The soak's lost `slow` calls: one timer per client, stopped and started again, kept only the time
    # it had left, so once a user's calls had taken the bound in all, the next failed early.
    steps = Steps()
    target = Target(STREAMABLE_HTTP, url=http_server.url)
    bound, calls, each = 1.5, 8, 0.3  # 8 x 0.3 s: well past the bound in all, each well within it
    client = McpClient(lambda: transport_for(target, timeout=10.0), steps, request_type=STREAMABLE_HTTP, timeout=bound)

    run(client, lambda: [client.call_tool("slow", {"seconds": each, "steps": 1}) for _ in range(calls)])
    slow = [step for step in steps.fired if step["name"] == "tools/call slow"]
    assert len(slow) == calls
    assert [str(step["exception"] or "") for step in slow] == [""] * calls, [round(s["response_time"]) for s in slow]


def test_a_session_holds_its_get_stream_open_until_it_ends(http_server):
    target = Target(STREAMABLE_HTTP, url=http_server.url)
    transports = []

    def make():
        transports.append(transport_for(target, timeout=10.0))
        return transports[-1]

    client = McpClient(make, Steps(), request_type=STREAMABLE_HTTP, timeout=10.0, get_stream=True)

    def body():
        for _ in range(100):  # the stream opens in its own greenlet: wait for it, boundedly
            if transports[0].get_streams:
                break
            gevent.sleep(0.05)
        return client.call_tool("echo", {"text": "with the GET stream open"})

    assert run(client, body) is not None
    assert transports[0].get_streams == 1
