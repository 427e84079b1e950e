"""Raw MCP clients that bring a session to an awkward moment and hold it there.

`Stream` sessions stop in the middle of a call's event stream: the handshake done, one call made
whose answer streams progress notifications, read up to the first one and held open. The bytes are
read with the protocol core's SSE parser; everything else is plain `http.client` and pipes, so
nothing here keeps a session alive behind the test's back. Every wait is bounded.
"""

import contextlib
import http.client
import subprocess
import threading
from collections.abc import Iterator
from typing import Final
from urllib.parse import urlsplit

import orjson

from mcpbench.protocol.sse import SseEvent, SseParser
from tests.hostile.stops import READY_WAIT, read_line_with

VERSION: Final = "2025-11-25"
HEADERS: Final = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
PROGRESS: Final = "notifications/progress"


def initialize(client: str = "signals", id_: int = 1) -> dict:
    params = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": client, "version": "1"}}
    return {"jsonrpc": "2.0", "id": id_, "method": "initialize", "params": params}


INITIALIZED: Final = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def slow_call(id_: int = 2, arguments: dict | None = None, token: str = "p") -> dict:
    """A `slow` call asking for progress (the reference server's tool, the paced recording's call)."""
    params = {"name": "slow", "arguments": arguments or {}, "_meta": {"progressToken": token}}
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


def _messages(response: http.client.HTTPResponse, parser: SseParser) -> Iterator[dict]:
    """The JSON-RPC messages of an SSE body as they arrive."""
    while chunk := response.read1(65536):
        for item in parser.feed(chunk):
            if type(item) is SseEvent and item.data and item.data.lstrip().startswith("{"):
                yield orjson.loads(item.data)


class Stream:
    """A Streamable HTTP session (`url`: …/mcp) whose `slow` call is streaming: `open` returns once
    its first progress notification has been read; the stream stays open until `close`."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.path = parts.path
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=READY_WAIT)
        self.calls = http.client.HTTPConnection(parts.hostname, parts.port, timeout=READY_WAIT)
        self.response: http.client.HTTPResponse | None = None

    def _post(self, conn: http.client.HTTPConnection, message: dict, headers: dict) -> http.client.HTTPResponse:
        conn.request("POST", self.path, orjson.dumps(message), {**HEADERS, **headers})
        return conn.getresponse()

    def open(self, arguments: dict | None = None) -> dict:
        """The handshake, then the call; returns the first progress notification."""
        answer = self._post(self.calls, initialize(), {})
        session = answer.getheader("mcp-session-id")
        answer.read()
        headers = {"mcp-protocol-version": VERSION, **({"mcp-session-id": session} if session else {})}
        self._post(self.calls, INITIALIZED, headers).read()
        self.response = self._post(self.conn, slow_call(arguments=arguments), headers)
        assert self.response.status == 200 and "text/event-stream" in (self.response.getheader("content-type") or "")
        for message in _messages(self.response, SseParser()):
            if message.get("method") == PROGRESS:
                return message
        raise AssertionError("the call's stream ended without a progress notification")

    def close(self) -> None:
        self.conn.close()
        self.calls.close()


class LegacyStream:
    """A legacy HTTP+SSE session (`url`: …/sse) whose `slow` call is streaming on its `GET /sse`."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.path = parts.path
        self.stream = http.client.HTTPConnection(parts.hostname, parts.port, timeout=READY_WAIT)
        self.posts = http.client.HTTPConnection(parts.hostname, parts.port, timeout=READY_WAIT)

    def open(self) -> dict:
        self.stream.request("GET", self.path, headers={"accept": "text/event-stream"})
        response = self.stream.getresponse()
        parser = SseParser()
        endpoint = None
        while endpoint is None and (chunk := response.read1(65536)):
            endpoint = next((e.data for e in parser.feed(chunk) if type(e) is SseEvent and e.event == "endpoint"), None)
        assert endpoint, "no endpoint event"
        messages = _messages(response, parser)
        for message in (initialize(), INITIALIZED, slow_call()):
            self.posts.request("POST", endpoint, orjson.dumps(message), HEADERS)
            self.posts.getresponse().read()
            if message.get("id") == 1:
                assert next(m for m in messages if m.get("id") == 1)["result"]
        return next(m for m in messages if m.get("method") == PROGRESS)

    def close(self) -> None:
        self.stream.close()
        self.posts.close()


def stdio_stream(proc: subprocess.Popen) -> dict:
    """Over `proc`'s pipes: the handshake, then a `slow` call read up to its first progress notification."""
    for message in (initialize(), INITIALIZED, slow_call()):
        proc.stdin.write(orjson.dumps(message) + b"\n")
        proc.stdin.flush()
        if message.get("id") == 1:
            assert b'"result"' in read_line_with(proc.stdout, b'"id":1')
    return orjson.loads(read_line_with(proc.stdout, PROGRESS.encode()))


@contextlib.contextmanager
def posting(url: str, message: dict) -> Iterator[threading.Thread]:
    """POST `message` to `url` from a thread (its answer may never come); joined, bounded, at the end."""

    def post() -> None:
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=READY_WAIT)
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn.request("POST", parts.path, orjson.dumps(message), HEADERS)
            conn.getresponse().read()
        conn.close()

    caller = threading.Thread(target=post, daemon=True)
    caller.start()
    try:
        yield caller
    finally:
        caller.join(READY_WAIT)
