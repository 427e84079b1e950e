"""Probing the lab: run checks through the library (`mcpbench.probe.run`), and an HTTP server that asks for a token."""

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Final

from mcpbench.probe.run import probe, select
from mcpbench.probe.target import ProbeSettings, ProbeTarget
from mcpbench.probe.verdicts import PASS, CheckRow
from tests.support.servers import HOST, free_port, stop_process, wait_for_port


def verdicts(url: str, *checks: str, settings: ProbeSettings | None = None) -> dict[str, CheckRow]:
    """The rows of `checks` against `url`, by check name."""
    run = probe(url, select(checks, idle_asked="idle" in checks), settings=settings)
    return {row.check: row for row in run.rows}


def verdict(url: str, check: str, settings: ProbeSettings | None = None) -> CheckRow:
    return verdicts(url, check, settings=settings)[check]


# Tries of a one-session check behind a balancer that keeps about 1 session in 3: all of them
# keeping their session has a chance of (1/3)^8, 1 in 6,561.
ROUTED_TRIES: Final = 8


def until_routed(check, target: ProbeTarget) -> list[CheckRow]:
    """`check` (a module of probe/checks) run on its own against `target` until it does not pass
    (a session of it lost, behind a balancer that keeps some), at most `ROUTED_TRIES` times; its rows."""
    rows: list[CheckRow] = []
    for _ in range(ROUTED_TRIES):
        rows.append(check.run(target, time.monotonic() + check.BOUND))
        if rows[-1].verdict != PASS:
            break
    return rows


# Answers every MCP request with 401 and, with "metadata" as its second argument, serves Protected
# Resource Metadata (RFC 9728) naming itself as the authorization server, and that server's metadata
# (RFC 8414); without it, the challenge names nothing and no metadata is found.
AUTH_SERVER: Final = """
import http.server, json, sys
PORT, SHAPE = int(sys.argv[1]), sys.argv[2]
BASE = f"http://127.0.0.1:{PORT}"
DOCS = {"/.well-known/oauth-protected-resource/mcp": {"resource": BASE + "/mcp", "authorization_servers": [BASE]},
        "/.well-known/oauth-authorization-server": {"issuer": BASE, "token_endpoint": BASE + "/token"}}
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        challenge = 'Bearer resource_metadata="' + BASE + '/.well-known/oauth-protected-resource/mcp"' if SHAPE == "metadata" else "Bearer"
        self.reply(401, b'{"error": "invalid_token"}', [("www-authenticate", challenge), ("content-type", "application/json")])
    def do_GET(self):
        doc = DOCS.get(self.path) if SHAPE == "metadata" else None
        if doc is None:
            self.reply(404)
        else:
            self.reply(200, json.dumps(doc).encode(), [("content-type", "application/json")])
    do_DELETE = do_POST
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
"""


@contextlib.contextmanager
def auth_server(shape: str) -> Iterator[str]:
    """A server that wants a token ("metadata": and says where to get one; "bare": and does not); yields its MCP URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", AUTH_SERVER, str(port), shape], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(HOST, port, proc=proc)
        yield f"http://{HOST}:{port}/mcp"
    finally:
        stop_process(proc)
