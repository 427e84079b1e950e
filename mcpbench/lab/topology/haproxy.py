"""HAProxy configurations a user would deploy in front of MCP server instances, one per policy.

Facts they rest on (measured with HAProxy 2.6, see the lab notes): `option http-no-delay` or SSE
events arrive ~200 ms late; `timeout server` is what cuts an idle SSE stream, and the SDK pings
idle streams every 15 s, so it stays well above that; in `mode http` every request is balanced on
its own. Sticky Streamable HTTP uses a stick table on `Mcp-Session-Id`; sticky legacy SSE cannot
(the session id is in the first SSE event's body), so a map from session id to server is filled
from that event and POSTs are routed by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from mcpbench.protocol.http import INSTANCE

# `session-hash`: the common advice of hashing on the session header (round-robin while a request
# names none, as the `initialize` that creates a session does), which keeps about 1 session in N.
BALANCE: Final = {"random": "random", "round-robin": "roundrobin", "sticky": "roundrobin", "source": "source",
                  "session-hash": "hdr(mcp-session-id)"}
# Above the SDK's 15 s idle-stream ping, so an idle SSE stream is never cut.
SERVER_TIMEOUT_S: Final = 60
# With buffering on, how long HAProxy holds an answer back waiting for its whole body: longer than
# any call of the lab's reference server (30 s at most), shorter than `timeout server`.
BUFFER_S: Final = 45
# The length of the SDK's legacy `endpoint` event (`event: endpoint`, `data: /messages/?session_id=`
# and 32 hex digits, CRLF line ends): HAProxy waits for that much of the stream's body before
# reading the session id from it. Servers with another path or id length need their own figure.
ENDPOINT_EVENT_BYTES: Final = 81
SESSION_ID_HEX: Final = 32
MAP_FILE: Final = "sessions.map"


def config(
    policy: str,
    transport: str,
    servers: Sequence[tuple[str, str, int]],
    *,
    port: int,
    folder: Path,
    buffer: bool = False,
) -> str:
    """The configuration text for `policy` in front of `servers` (name, host, port) on 127.0.0.1:`port`.

    Legacy SSE with `sticky` needs `folder/sessions.map` to exist (empty) before HAProxy starts;
    `write_config` creates it. `buffer`: each answer is held back until its body is complete (up
    to `BUFFER_S`, or a full buffer), as a proxy with response buffering on does to SSE.
    """
    if policy not in BALANCE:
        raise ValueError(f"unknown policy {policy!r}")
    backend = [f"    balance {BALANCE[policy]}", f"    http-response set-header {INSTANCE} %[srv_name]"]
    if policy == "sticky" and transport == "streamable-http":
        backend += [
            "    stick-table type string len 64 size 100k expire 30m",
            "    stick match req.hdr(mcp-session-id)",
            "    stick store-response res.hdr(mcp-session-id)",
        ]
    elif policy == "sticky" and transport == "sse":
        sessions = (folder / MAP_FILE).resolve()
        backend += [
            "    acl is_sse res.hdr(content-type) -m beg text/event-stream",
            f"    http-response wait-for-body time 2s at-least {ENDPOINT_EVENT_BYTES} if is_sse",
            f"    http-response set-map({sessions}) %[res.body,field(2,=),bytes(0,{SESSION_ID_HEX})] %[srv_name] if is_sse",
        ]
        backend += [f"    use-server {name} if {{ url_param(session_id),map({sessions}) -m str {name} }}" for name, _, _ in servers]
    if buffer:
        backend.append(f"    http-response wait-for-body time {BUFFER_S}s")
    backend += [f"    server {name} {host}:{server_port}" for name, host, server_port in servers]
    return "\n".join([
        f"# mcpbench lab: {transport} behind HAProxy, policy {policy}",
        "global",
        "    maxconn 4096",
        "",
        "defaults",
        "    mode http",
        "    option http-no-delay",
        "    timeout connect 5s",
        "    timeout client 60s",
        f"    timeout server {SERVER_TIMEOUT_S}s",
        "",
        "frontend mcp",
        f"    bind 127.0.0.1:{port}",
        "    default_backend mcp",
        "",
        "backend mcp",
        *backend,
        "",
    ])


def write_config(policy: str, transport: str, servers: Sequence[tuple[str, str, int]], *, port: int, folder: Path,
                 buffer: bool = False) -> Path:
    """Write `folder/haproxy-<policy>.cfg` (and the empty session map it may need); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MAP_FILE).touch()
    path = folder / f"haproxy-{transport}-{policy}.cfg"
    path.write_text(config(policy, transport, servers, port=port, folder=folder, buffer=buffer))
    return path
