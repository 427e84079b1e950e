"""A client that dispatches notifications a step later than answers, as a widely used client SDK does.

Each chunk read is handled at once: an answer completes its call there and then, and drops the
call's progress callback; a notification is only scheduled (`loop.call_soon`) and dispatched on the
event loop's next step. Two messages that arrive in one read, or in reads that need no wait, are
handled before any scheduled dispatch runs: a progress notification written back to back with its
answer reaches a callback that is already gone. Spaced as the server spaced them, it arrives.

`progress_seen(transport, url_or_argv)` makes one `tools/call slow` (3 steps) with a progress token
over stdio, legacy HTTP+SSE or Streamable HTTP (asyncio, h11 for HTTP) and returns how many progress
notifications reached the callback.
"""

import asyncio
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import h11
import orjson

from mcpbench.protocol.framing import LineFramer
from mcpbench.protocol.sse import SseEvent, SseParser

VERSION = "2025-11-25"
TOKEN = "late-1"
SLOW = {"name": "slow", "arguments": {"seconds": 0.3, "steps": 3}, "_meta": {"progressToken": TOKEN}}
READ_SIZE = 64 * 1024
TIMEOUT = 30.0


class LateDispatcher:
    """The client's message handling: answers at once, notifications a step later."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.calls: dict = {}  # request id -> future of its answer
        self.progress: dict[str, Callable[[dict], None]] = {}
        self.session_id: str | None = None
        self.endpoint: str | None = None
        self.endpoint_ready = asyncio.Event()

    def request(self, request_id: int, method: str, params: dict) -> tuple[bytes, asyncio.Future]:
        future = self.loop.create_future()
        self.calls[request_id] = future
        return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}), future

    def received(self, data: bytes) -> None:
        message = orjson.loads(data)
        if "method" not in message:  # an answer: handled now, and the call's progress callback goes
            self.progress.pop(TOKEN, None)
            future = self.calls.pop(message.get("id"), None)
            if future is not None and not future.done():
                future.set_result(message)
        elif "id" not in message:
            self.loop.call_soon(self._dispatch, message)

    def _dispatch(self, message: dict) -> None:
        token = (message.get("params") or {}).get("progressToken")
        if message["method"] == "notifications/progress" and (callback := self.progress.get(token)) is not None:
            callback(message)


async def _stdio(argv: Sequence[str], client: LateDispatcher, seen: list) -> None:
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.DEVNULL)

    async def read() -> None:
        framer = LineFramer()
        while chunk := await proc.stdout.read(READ_SIZE):
            for line in framer.lines(chunk):
                if line.strip():
                    client.received(line)

    reader = asyncio.create_task(read())

    async def call(request_id: int, method: str, params: dict) -> dict:
        data, future = client.request(request_id, method, params)
        proc.stdin.write(data + b"\n")
        await proc.stdin.drain()
        return await future

    try:
        await _session(call, lambda data: _stdio_write(proc, data), client, seen)
    finally:
        proc.stdin.close()
        reader.cancel()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def _stdio_write(proc, data: bytes) -> None:
    proc.stdin.write(data + b"\n")
    await proc.stdin.drain()


async def _session(call, notify, client: LateDispatcher, seen: list) -> None:
    """The handshake, then `slow` with a progress callback that counts into `seen`."""
    await call(1, "initialize", {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "late", "version": "1"}})
    await notify(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    client.progress[TOKEN] = seen.append
    answer = await call(2, "tools/call", SLOW)
    assert "result" in answer, answer


class _Http:
    """One HTTP/1.1 connection read chunk by chunk with h11: `on_body(bytes)` gets each piece of a body."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.h11 = h11.Connection(h11.CLIENT)

    async def exchange(self, method: str, target: str, headers: dict, body: bytes, on_body: Callable[[bytes], None]) -> h11.Response:
        if self.h11.our_state is h11.DONE:
            self.h11.start_next_cycle()
        fields = [("host", f"{self.host}:{self.port}"), *headers.items()]
        if method == "POST":
            fields.append(("content-length", str(len(body))))
        out = self.h11.send(h11.Request(method=method, target=target, headers=fields))
        if body:
            out += self.h11.send(h11.Data(data=body))
        out += self.h11.send(h11.EndOfMessage())
        self.writer.write(out)
        await self.writer.drain()
        response = None
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(await self.reader.read(READ_SIZE))
            elif type(event) is h11.Response:
                response = event
            elif type(event) is h11.Data:
                on_body(bytes(event.data))
            elif type(event) in (h11.EndOfMessage, h11.ConnectionClosed):
                return response

    def close(self) -> None:
        self.writer.close()


def _sse_body(client: LateDispatcher) -> Callable[[bytes], None]:
    parser = SseParser()

    def on_body(chunk: bytes) -> None:
        for event in parser.feed(chunk):
            if type(event) is not SseEvent or event.data is None:
                continue
            if event.type == "endpoint":
                client.endpoint = event.data
                client.endpoint_ready.set()
            elif event.data.lstrip().startswith("{"):
                client.received(event.data.encode())

    return on_body


async def _streamable(url: str, client: LateDispatcher, seen: list) -> None:
    parts = urlsplit(url)
    http = _Http(parts.hostname, parts.port)
    await http.open()

    def headers() -> dict:
        out = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if client.session_id:
            out.update({"mcp-session-id": client.session_id, "mcp-protocol-version": VERSION})
        return out

    async def post(data: bytes) -> h11.Response:
        body = bytearray()
        parser = _sse_body(client)

        def on_body(chunk: bytes) -> None:
            body.extend(chunk)
            parser(chunk)

        response = await http.exchange("POST", parts.path, headers(), data, on_body)
        kind = dict(response.headers).get(b"content-type", b"")
        if body and kind.startswith(b"application/json"):
            client.received(bytes(body))
        if http.h11.their_state is h11.MUST_CLOSE or http.h11.our_state is h11.MUST_CLOSE:
            http.close()
            await http.open()
        return response

    async def call(request_id: int, method: str, params: dict) -> dict:
        data, future = client.request(request_id, method, params)
        response = await post(data)
        if method == "initialize":
            client.session_id = dict(response.headers)[b"mcp-session-id"].decode()
        return await asyncio.wait_for(future, TIMEOUT)

    try:
        await _session(call, post, client, seen)
    finally:
        http.close()


async def _legacy(url: str, client: LateDispatcher, seen: list) -> None:
    parts = urlsplit(url)
    stream, posts = _Http(parts.hostname, parts.port), _Http(parts.hostname, parts.port)
    await stream.open()
    await posts.open()
    reading = asyncio.create_task(stream.exchange("GET", parts.path, {"accept": "text/event-stream"}, b"", _sse_body(client)))
    await asyncio.wait_for(client.endpoint_ready.wait(), TIMEOUT)

    async def post(data: bytes) -> None:
        await posts.exchange("POST", client.endpoint, {"content-type": "application/json"}, data, lambda chunk: None)

    async def call(request_id: int, method: str, params: dict) -> dict:
        data, future = client.request(request_id, method, params)
        await post(data)
        return await asyncio.wait_for(future, TIMEOUT)

    try:
        await _session(call, post, client, seen)
    finally:
        reading.cancel()
        stream.close()
        posts.close()


def progress_seen(transport: str, target: str | Sequence[str]) -> int:
    """How many of the 3 progress notifications of one `slow` call reach this client's callback."""

    async def main() -> int:
        client, seen = LateDispatcher(), []
        run = {"stdio": _stdio, "sse": _legacy, "streamable-http": _streamable}[transport]
        await asyncio.wait_for(run(target, client, seen), TIMEOUT)
        return len(seen)

    return asyncio.run(main())
