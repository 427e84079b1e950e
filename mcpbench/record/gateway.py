"""An upstream that cannot be reached: the MCP client gets a 502 whose body is a JSON-RPC error.

When the upstream refuses, resets, fails the TLS handshake or breaks off an answer before any of
it was passed on (mitmproxy passes an answer on whole, an event stream excepted), mitmproxy
answers the client itself: `502 Bad Gateway` with an HTML page naming the cause
(`make_error_response` in its HTTP/1 layer). An MCP client reads an HTML body as "not MCP" and
loses the cause. So for an MCP exchange the recording addon answers first, from its `error` hook:
a `502` with `Content-Type: application/json` and a JSON-RPC error (`-32603`, the request's id)
whose message names the upstream and the cause, written to the client's connection; then it kills
the flow, which makes mitmproxy close that connection without its own page (mitmproxy 12 has no
hook that replaces the page, and its error answer ignores `flow.response`). The answer is also set
as `flow.response`, so the trace's `http` event holds what the client saw.

Only where the bytes can go onto the client's connection as they are: a plain-text HTTP/1 client
connection that is still open, whose request arrived whole. A TLS or HTTP/2 client (regular proxy
mode with an intercepted https upstream) still gets mitmproxy's page.
"""

from __future__ import annotations

from mitmproxy import ctx, http
from mitmproxy.connection import ConnectionState
from mitmproxy.net.http import http1

from mcpbench.protocol import jsonrpc

BAD_GATEWAY = 502
HTTP1 = (b"HTTP/1.1", b"HTTP/1.0")


def error_body(request_id: jsonrpc.MessageId | None, detail: str, upstream: str) -> bytes:
    """The JSON-RPC error a client gets for its request `request_id` (None: not one request)."""
    message = f"mcpbench: the upstream {upstream} failed before it answered: {detail}"
    return jsonrpc.encode(jsonrpc.ErrorResponse(id=request_id, code=jsonrpc.INTERNAL_ERROR, message=message))


def answer_bad_gateway(flow, detail: str, upstream: str, request_id: jsonrpc.MessageId | None) -> bool:
    """Send the client of `flow` a 502 with a JSON-RPC error body answering `request_id` (the id of
    the request it POSTed; None when it sent no single request), in place of mitmproxy's page.

    Returns:
        Whether it was sent (`flow.response` is then that answer and the flow killed).
    """
    request, client = flow.request, flow.client_conn
    if (
        (flow.response is not None and flow.response.stream) or not flow.killable or request.timestamp_end is None
        or request.data.http_version not in HTTP1 or client.tls or client.state != ConnectionState.OPEN
    ):
        return False
    proxyserver = ctx.master.addons.get("proxyserver")
    handler = proxyserver.connections.get(client.id) if proxyserver else None
    io = handler.transports.get(client) if handler else None
    if io is None or io.writer is None:
        return False
    response = http.Response.make(
        BAD_GATEWAY, error_body(request_id, detail, upstream), {"content-type": "application/json", "connection": "close"},
    )
    io.writer.write(http1.assemble_response(response))
    flow.response = response
    flow.kill()  # mitmproxy then closes the connection and sends nothing of its own
    return True
