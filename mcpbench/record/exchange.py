"""One HTTP exchange as the recording addon follows it.

Helpers here turn mitmproxy's raw request and response parts into what a trace holds (header pairs,
URLs, bodies cut to `MAX_BODY_BYTES`), at the least cost: they run for every proxied request.
"""

from typing import TYPE_CHECKING

import orjson

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.session import Violation
from mcpbench.protocol.transports import STREAMABLE_HTTP
from mcpbench.trace.format import text_or_b64

if TYPE_CHECKING:
    from mcpbench.record.streams import SseTap


# How much of a body an `http` event keeps (error statuses, bodies that are not JSON) and how much
# raw input a `violation` keeps: enough to read an error page or see what broke, while a large
# download does not bloat the trace. Longer bodies are cut and the full size is given.
MAX_BODY_BYTES = 64 * 1024


def json_text(raw: bytes) -> bytes:
    """`raw` (known JSON) as one line: a pretty-printed body must not split a JSONL line."""
    if b"\n" in raw or b"\r" in raw:
        return orjson.dumps(orjson.loads(raw))
    return raw


# Distinct (scheme, host, port) origins and wire strings (methods, HTTP versions, reasons) kept
# decoded: a few per upstream; emptied when full.
TEXT_CACHE_SIZE = 1024
_ORIGINS: dict[tuple, str] = {}
# mitmproxy decodes a reason phrase as ISO-8859-1 (`Response.reason`), everything else as UTF-8
# with surrogate escapes.
UTF8, LATIN1 = "utf-8", "iso-8859-1"
_WIRE_TEXT: dict[str, dict[bytes, str]] = {UTF8: {}, LATIN1: {}}


def url_of(request, path: str) -> str:
    """The request's absolute URL (mitmproxy's `Request.url` rebuilds it at a much higher cost):
    its origin, decoded once per (scheme, host, port), and `path`."""
    data = request.data
    key = (data.scheme, data.host, data.port)
    origin = _ORIGINS.get(key)
    if origin is None:
        if len(_ORIGINS) >= TEXT_CACHE_SIZE:
            _ORIGINS.clear()
        host = request.host
        if ":" in host:
            host = f"[{host}]"
        origin = _ORIGINS[key] = f"{request.scheme}://{host}:{request.port}"
    return origin + path


def wire_text(raw: bytes, encoding: str = UTF8) -> str:
    """A short wire string (method, HTTP version; a reason phrase in `LATIN1`) as mitmproxy's
    properties decode it, cached."""
    cache = _WIRE_TEXT[encoding]
    text = cache.get(raw)
    if text is None:
        if len(cache) >= TEXT_CACHE_SIZE:
            cache.clear()
        text = cache[raw] = raw.decode(encoding, "surrogateescape") if encoding == UTF8 else raw.decode(encoding)
    return text


def body_fields(body: bytes, name: str = "body") -> dict:
    if len(body) <= MAX_BODY_BYTES:
        return {name: text_or_b64(body)}
    return {name: text_or_b64(body[:MAX_BODY_BYTES]), f"{name}_size": len(body), f"{name}_truncated": True}


class HttpExchange:
    """What the recorder knows about one HTTP exchange (one mitmproxy flow) while it is open."""

    __slots__ = (
        "flow", "flow_id", "conn", "method", "path", "mcp", "session", "transport", "req_headers",
        "req_content_type", "req_raw", "req_message", "req_ts", "req_problems", "req_call", "resp_headers", "resp_status",
        "resp_content_type", "tap",
    )

    def __init__(self, flow, conn: str, method: str, path: str) -> None:
        self.flow = flow  # mitmproxy's flow: what the `http` event of an exchange the proxy's stop cuts short reads
        self.flow_id = flow.id
        self.conn = conn
        self.method = method
        self.path = path
        self.mcp = False
        self.session: str | None = None  # None until known (see `McpRecorder.resolve`)
        self.transport = STREAMABLE_HTTP
        self.req_headers: dict[str, str] = {}
        self.req_content_type: str | None = None
        # The request body, recorded once the session key is known.
        self.req_raw: bytes | None = None
        self.req_message: jsonrpc.Message | None = None
        self.req_ts = 0.0
        self.req_problems: list[Violation] = []
        self.req_call: tuple[object, str] | None = None  # the POSTed request's (id, label): what its answer pairs with
        self.resp_headers: dict[str, str] | None = None
        self.resp_status: int | None = None
        self.resp_content_type: str | None = None
        self.tap: "SseTap | None" = None  # an SSE answer's

    def request_id(self) -> jsonrpc.MessageId | None:
        """The id of the one JSON-RPC request this exchange POSTed (recorded or not yet), or None."""
        if self.req_call is not None:
            return self.req_call[0]
        return self.req_message.id if type(self.req_message) is jsonrpc.Request else None
