"""`serve-trace`: a mock MCP server that answers from a recording.

The parts: `mock_answers.py` (`TraceAnswers`: what the recording says to each
request, no I/O), `mock_play.py` (one call's messages in recorded order and
spacing), and two shells around the core's server role
(`protocol/server.ServerConnection`, which holds the transport rules):
`mock_stdio.py` (newline-delimited JSON-RPC on stdin/stdout) and `mock_http.py`
(Streamable HTTP, `POST /mcp`: answers recorded as SSE are re-emitted as SSE
with their notifications and server requests, JSON ones as JSON; legacy
HTTP+SSE, `GET /sse` + `POST /messages/?session_id=…`).
"""

import sys

from mcpbench.system.listen import bind_error
from mcpbench.protocol.server import HostCheck
from mcpbench.protocol.transports import STDIO
from mcpbench.replay.engine import Pace
from mcpbench.replay.forward import Forwarder
from mcpbench.replay.mock_answers import NOT_RECORDED, WRONG_ERA, RecordedReply, TraceAnswers, answer_for, match_key
from mcpbench.replay.mock_http import MockHttpServer
from mcpbench.replay.mock_play import DEFAULT_PACE
from mcpbench.replay.mock_stdio import serve_stdio
from mcpbench.replay.plan import TracePlan


def serve(trace: TracePlan, transport: str, *, host: str = "127.0.0.1", port: int = 8000,
          json_response: bool = False, forward: Forwarder | None = None, pace: Pace = DEFAULT_PACE,
          allowed_hosts: tuple[str, ...] = (), allowed_origins: tuple[str, ...] = ()) -> None:
    """Serve `trace` on `transport` until interrupted (stdio: until stdin closes).

    With `forward`, unrecorded requests are answered by its live server. HTTP: `Host` and `Origin`
    are checked as the official SDK does (on for a loopback `host`), `allowed_hosts` and
    `allowed_origins` allowed besides.
    """
    answers = TraceAnswers(trace)
    if transport == STDIO:
        try:
            serve_stdio(answers, forward=forward, pace=pace)
        finally:  # also on Ctrl-C or SIGTERM: the live upstream (a child process, say) is stopped
            if forward is not None:
                forward.close()
        return
    check = HostCheck.for_bind(host, hosts=allowed_hosts, origins=allowed_origins)
    try:
        server = MockHttpServer(answers, transport=transport, host=host, port=port, json_response=json_response,
                                forward=forward, pace=pace, host_check=check)
    except OSError as exc:
        raise bind_error(host, port, exc) from None
    print(f"mcpbench: serving {trace.path} ({transport}) on {server.url}", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.stopping.set()
        server.server_close()
        if forward is not None:
            forward.close()


__all__ = ["MockHttpServer", "NOT_RECORDED", "RecordedReply", "TraceAnswers", "WRONG_ERA", "answer_for", "match_key",
           "serve", "serve_stdio"]
