"""Request classification for the recording addon: is an HTTP request MCP, which transport and
session does it belong to, and what message (or problem) does its body hold (read by the protocol
core's observer, `observer.read_body`).

Requests that are not MCP pass untouched and are recorded as `http` events only. The answer is
decided from what the request itself shows, at the least cost (it runs for every proxied request):
a POST to a legacy endpoint, an `Mcp-Session-Id`, a JSON content type, the MCP headers, or a body
that looks like JSON; a GET that carries a session or asks for an event stream; a DELETE of a session.
"""

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.http import METHOD, PROTOCOL_VERSION, SESSION_ID, method_header_problems
from mcpbench.protocol.media import is_json, looks_json
from mcpbench.protocol.observer import Observed, Violation, read_body
from mcpbench.protocol.session import C2S
from mcpbench.protocol.transports import LEGACY_SSE
from mcpbench.protocol.versions import meta_version
from mcpbench.record.exchange import HttpExchange, json_text
from mcpbench.record.sessions import SessionBook
from mcpbench.trace.format import now


def classify(ex: HttpExchange, request, headers: dict[str, str], book: SessionBook) -> None:
    """Set `ex.mcp`, `ex.transport` and `ex.session` (None: decided by the answer) from `request`
    (a mitmproxy request whose lower-cased headers are `headers`), and read an MCP POST's body."""
    session_id = headers.get(SESSION_ID) or None
    method = ex.method
    if method == "POST":
        legacy = book.endpoint_session(request)
        body = request.data.content or b""  # `raw_content`, without the property
        if body and "content-encoding" in headers:
            body = request.get_content(strict=False) or b""
        if legacy is not None:
            ex.session, ex.transport = legacy, LEGACY_SSE
        elif session_id is not None:
            ex.session = session_id
        ex.mcp = (
            legacy is not None
            or session_id is not None
            or is_json(ex.req_content_type)
            or PROTOCOL_VERSION in headers
            or METHOD in headers
            or looks_json(body)
        )
        if ex.mcp:
            read_request(ex, body, headers)
    elif method == "GET":
        # The Streamable HTTP GET stream carries a session; legacy `GET /sse` carries nothing.
        ex.mcp = session_id is not None or "text/event-stream" in headers.get("accept", "")
        ex.session = session_id
    elif method == "DELETE":
        ex.mcp = session_id is not None
        ex.session = session_id


def read_request(ex: HttpExchange, body: bytes, headers: dict[str, str]) -> None:
    """Read an MCP request's body into `ex.req_message`, or note why it holds none (`req_problems`),
    with the header rules its message breaks; they are recorded once the session key is known."""
    ex.req_ts = now()
    (event,) = read_body(body, C2S, ex.req_content_type, required=True, label=f"{ex.method} {ex.path}")
    if type(event) is not Observed:
        ex.req_problems.append(event)
        return
    message = event.message
    ex.req_raw, ex.req_message = json_text(event.raw), message
    if not isinstance(message, jsonrpc.Batch):
        version = meta_version(getattr(message, "params", None)) or headers.get(PROTOCOL_VERSION)
        for code, detail in method_header_problems(message, headers, version=version, transport=ex.transport):
            ex.req_problems.append(Violation(code, detail, C2S))
