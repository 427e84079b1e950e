"""A load user's MCP client (`McpClient`) run in a greenlet, for the load client's tests: its steps and reconnect records."""

import random

import gevent

from mcpbench.load.client import McpClient
from mcpbench.transport.green import transport_for
from mcpbench.protocol.asks import AskPolicy
from mcpbench.protocol.reconnect import ReconnectPolicy
from mcpbench.system.target import Target
from mcpbench.protocol.transports import STREAMABLE_HTTP

# Every step of these clients is bounded by this (seconds); the greenlet by a little more.
TIMEOUT = 20.0


class Run:
    """One client's session in a greenlet: results per call, steps reported, reconnect records."""

    def __init__(self, url: str | Target, policy: ReconnectPolicy | None, *, asks: AskPolicy | None = None,
                 timeout: float = TIMEOUT, version: str = "2025-11-25") -> None:
        self.steps: list[dict] = []
        self.reconnects: list[dict] = []
        target = url if isinstance(url, Target) else Target(STREAMABLE_HTTP, url=url)
        self.client = McpClient(lambda: transport_for(target, timeout=TIMEOUT), self,
                                request_type=target.transport, version=version, timeout=timeout,
                                reconnect=policy, on_reconnect=self.reconnects.append, rng=random.Random(3), policy=asks)

    def fire(self, **kw) -> None:
        self.steps.append(kw)

    def calls(self, *calls, before=None) -> list:
        """Start a session (a few tries: faults may hit the handshake), then make `calls` in order."""

        def go():
            try:
                for _ in range(10):
                    if self.client.start_session():
                        break
                else:
                    raise AssertionError(f"no session: {self.steps}")
                out = []
                for index, (tool, arguments, *meta) in enumerate(calls):  # meta: the params' `_meta`, if any
                    if before is not None:
                        before(index)
                    extra = {"_meta": meta[0]} if meta else {}
                    out.append(self.client.call("tools/call", {"name": tool, "arguments": arguments, **extra}))
                return out
            finally:
                self.client.end_session()
                self.client.close_transport()

        greenlet = gevent.spawn(go)
        greenlet.join(timeout=TIMEOUT * (len(calls) + 4))
        assert greenlet.ready(), "the client did not finish"
        if greenlet.exception is not None:
            raise greenlet.exception
        return greenlet.value

    def failures(self, step: str) -> list:
        return [s["exception"].kind if s["exception"] else None for s in self.steps if s["name"] == step]


class Steps:
    """The steps a client fired (its Locust events), kept in order."""

    def __init__(self) -> None:
        self.fired: list[dict] = []

    def fire(self, **kw) -> None:
        self.fired.append(kw)


def in_session(client: McpClient, steps: Steps, body) -> tuple[object, Steps]:
    """`body()` inside one session of `client`, in a greenlet bounded in time: its value and the steps fired."""

    def run():
        try:
            assert client.start_session(), steps.fired
            return body()
        finally:
            client.end_session()
            client.close_transport()

    greenlet = gevent.spawn(run)
    greenlet.join(timeout=3 * TIMEOUT)
    assert greenlet.ready(), "the client did not finish"
    if greenlet.exception is not None:
        raise greenlet.exception
    return greenlet.value, steps
