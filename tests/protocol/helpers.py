"""Helpers for protocol tests: feed a decoder whole, byte by byte, and in random chunks."""

from mcpbench.protocol.framing import Signal
from mcpbench.protocol.client import STDOUT, LegacyHead, PostHead


def drain(machine) -> list:
    """Every event a sans-IO machine has ready."""
    out = []
    while not isinstance(event := machine.next_event(), Signal):
        out.append(event)
    return out


def feed_all(factory, data: bytes, splits=None, *, eof: bool = True) -> list:
    """Events from a fresh machine fed `data` cut at `splits` (None: whole)."""
    machine = factory()
    cuts = [0, *sorted(splits or ()), len(data)]
    events = []
    for start, end in zip(cuts, cuts[1:]):
        if end > start:
            machine.receive_data(data[start:end])
            events += drain(machine)
    if eof:
        machine.receive_data(b"")
        events += drain(machine)
    return events


def byte_by_byte(factory, data: bytes, *, eof: bool = True) -> list:
    return feed_all(factory, data, range(1, len(data)), eof=eof)


class ServerPair:
    """A `ClientConnection` wired to a `ServerConnection` in memory, no sockets: what one sends, the other gets.

    `answer(call, server)` plays the server's part for each call: it returns the messages to send
    for it (notifications, server requests made with `server.ask`, the answer last). `json`: answer
    Streamable HTTP POSTs with a JSON body instead of an SSE stream.
    """

    HOST = "127.0.0.1:8000"

    def __init__(self, client, server, answer, *, json: bool = False) -> None:
        self.client, self.server, self.answer, self.json = client, server, answer, json
        self.legacy = None  # the legacy stream's reader
        self.accepted: list = []  # what the server accepted (notifications, answers to its requests)

    def http(self, method: str, url: str, headers: dict | None = None, body: bytes = b""):
        from urllib.parse import urlsplit

        from mcpbench.protocol.server import HttpRequest

        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        return self.server.http(HttpRequest(method=method, target=target, headers={"host": self.HOST, **(headers or {})}, body=body))

    def open_legacy(self) -> list:
        """Legacy HTTP+SSE: `GET /sse`; the client's events for the stream's head and endpoint."""
        opened = self.http("GET", self.client.url, self.client.headers("legacy"))
        self.legacy = self.client.reader(LegacyHead(opened.reply.status, dict(opened.reply.headers)["content-type"]))
        return self.legacy.feed(opened.reply.body)

    def send(self, out) -> list:
        """Deliver the client's `Outgoing`; the client's events for what the server sends back."""
        from mcpbench.protocol.server import Accepted, Call

        if self.client.transport == "stdio":
            events = []
            for event in self.server.receive_stdin(out.data):
                if type(event) is Call:
                    events += self.client.reader(STDOUT).feed(b"".join(self.server.event(event, m) for m in self.answer(event, self.server)))
                elif type(event) is Accepted:
                    self.accepted.append(event)
            return events
        event = self.http("POST", out.url, out.headers, out.data)
        if type(event) is Accepted:
            self.accepted.append(event)
        if type(event) is not Call:
            reader = self.client.reader(PostHead(out, event.reply.status, dict(event.reply.headers).get("content-type")))
            return reader.feed(event.reply.body) + reader.feed(b"")
        messages = self.answer(event, self.server)
        if event.reply is not None:  # legacy: 202 now, the answer on the stream
            return self.legacy.feed(b"".join(self.server.event(event, m) for m in messages))
        if self.json:
            reply = self.server.respond(event, messages[-1])
            body = reply.body
        else:
            reply = self.server.stream(event)
            body = b"".join(self.server.event(event, m) for m in messages)
        headers = dict(reply.headers)
        reader = self.client.reader(PostHead(out, reply.status, headers["content-type"], headers.get("mcp-session-id")))
        return reader.feed(body) + reader.feed(b"")
