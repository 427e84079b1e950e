"""Protocol cases: bytes a client should not send, sent on the live session, then a `ping` to see it survived.

Each case is one payload written as the transport carries a message (a stdio line, an HTTP POST
body with the session's headers). What the server answers to the payload itself is read (an HTTP
5xx is a crash) but not judged further: servers answer malformed input in many allowed ways. The
`ping` after it is: no answer (hang), the process or connection gone (crash).

The header cases (Streamable HTTP) are requests the client core builds, their headers then changed:
a call without `Mcp-Session-Id` (a call before the handshake), an unsupported `MCP-Protocol-Version`,
none at all; and as 2026-07-28 requests, an `Mcp-Method` or `Mcp-Name` that disagrees with the
body, a version header that disagrees with the `_meta` envelope. What the
server must answer to them is the core's: the same POST given to `ServerConnection` (its
session minted with the real server's id) is refused or accepted (`expected_refusal`); a server
answering 2xx where the core refuses is a `protocol` finding.

A call before the handshake on stdio and legacy SSE is a fresh session (a new process, a new
stream) whose first message is a `tools/list`: the core's server rules take it as a call there (the
official SDK answers it with an error), so only a crash or a hang is a finding; the handshake after it
must then work. In 2026-07-28 there is no handshake, and no case of it.

A tampered `requestState` (2026-07-28) is no case of its own here: it needs a tool that answered
`input_required` with a state, so the runner sends it after such an answer (`tampered`).
"""

from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from mcpbench.protocol.http import METHOD, NAME, PROTOCOL_VERSION, SESSION_ID
from mcpbench.protocol.server import HttpRequest, Refused, ServerConnection
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.protocol.versions import LATEST, LATEST_HANDSHAKE

# The payloads: (name, bytes). None has a newline (a stdio line must stay one line).
PAYLOADS: tuple[tuple[str, bytes], ...] = (
    ("malformed-json", b'{"jsonrpc": "2.0", "id": "fz-1", "method": "tools/list"'),
    ("not-an-object", b'"just a string"'),
    ("wrong-jsonrpc", b'{"jsonrpc": "1.0", "id": "fz-2", "method": "tools/list"}'),
    ("no-jsonrpc", b'{"id": "fz-3", "method": "tools/list"}'),
    ("null-id", b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}'),
    ("bool-id", b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}'),
    ("object-id", b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}'),
    ("float-id", b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}'),
    ("huge-id", b'{"jsonrpc": "2.0", "id": 1180591620717411303424, "method": "tools/list"}'),
    ("unknown-method", b'{"jsonrpc": "2.0", "id": "fz-4", "method": "mcpbench/no-such-method"}'),
    ("method-not-string", b'{"jsonrpc": "2.0", "id": "fz-5", "method": 7}'),
    ("params-not-object", b'{"jsonrpc": "2.0", "id": "fz-6", "method": "tools/list", "params": [1, 2]}'),
    ("notification-for-request", b'{"jsonrpc": "2.0", "method": "tools/list"}'),
    ("batch", b'[{"jsonrpc": "2.0", "id": "fz-7", "method": "ping"}]'),
    ("empty-batch", b"[]"),
    ("oversized", b'{"jsonrpc": "2.0", "id": "fz-8", "method": "tools/list", "params": {"pad": "' + b"x" * (8 << 20) + b'"}}'),
)

# Header cases, Streamable HTTP only: (name, the request the client core builds: method, params, as which
# version (None: the session's), header changes: a value, or None to leave the header out).
# A 2026-07-28 client has no session: those cases leave the handshake's Mcp-Session-Id out (with it, a
# 2025-11-25 version header makes a handshake-era request whose `_meta` merely holds extra keys).
# The named request calls a tool no server has: a server that ignores a wrong Mcp-Name calls nothing.
NO_TOOL = {"name": "mcpbench-fuzz-no-such-tool", "arguments": {}}
BEFORE_HANDSHAKE = "call-before-handshake"
HEADER_CASES: tuple[tuple[str, str, dict | None, str | None, tuple[tuple[str, str | None], ...]], ...] = (
    (BEFORE_HANDSHAKE, "tools/list", None, None, ((SESSION_ID, None),)),
    ("wrong-version-header", "tools/list", None, None, ((PROTOCOL_VERSION, "1999-01-01"),)),
    ("missing-version-header", "tools/list", None, None, ((PROTOCOL_VERSION, None),)),
    ("method-header-mismatch", "tools/list", None, LATEST, ((SESSION_ID, None), (METHOD, "ping"))),
    ("name-header-mismatch", "tools/call", NO_TOOL, LATEST, ((SESSION_ID, None), (NAME, "mcpbench-fuzz-other-tool"))),
    ("version-header-mismatch", "tools/list", None, LATEST, ((SESSION_ID, None), (PROTOCOL_VERSION, LATEST_HANDSHAKE))),
)

# The case name a protocol finding carries as its tool.
PROTOCOL_TOOL = "(protocol)"


@dataclass(frozen=True)
class ProtocolCase:
    name: str
    payload: bytes
    headers: tuple[tuple[str, str | None], ...] = ()  # changes to the request's headers
    transports: tuple[str, ...] = ()  # where it is sent (empty: everywhere)
    request: tuple[str, dict | None, str | None] | None = None  # built by the client core: method, params, version
    fresh: bool = False  # sent first on a session of its own, before its handshake (stdio, legacy SSE)

    def shown(self, limit: int = 200) -> str:
        text = self.payload.decode(errors="replace")
        return text if len(text) <= limit else f"{text[:limit]}… ({len(self.payload):,} bytes)"

    def is_json(self) -> bool:
        try:
            orjson.loads(self.payload)
        except orjson.JSONDecodeError:
            return False
        return True


def protocol_cases(transport: str | None = None, handshake: bool = True) -> list[ProtocolCase]:
    """The cases sent on `transport` (None: every case) in a session of the handshake era or not."""
    every = [ProtocolCase(name, payload) for name, payload in PAYLOADS]
    every += [ProtocolCase(name, b"", changes, (STREAMABLE_HTTP,), (method, params, version))
              for name, method, params, version, changes in HEADER_CASES]
    every.append(ProtocolCase(BEFORE_HANDSHAKE, b"", (), (STDIO, LEGACY_SSE), ("tools/list", None, None), fresh=True))
    return [case for case in every if (transport is None or not case.transports or transport in case.transports)
            and (handshake or case.name != BEFORE_HANDSHAKE)]


def tampered(state: object) -> str:
    """A `requestState` altered the least that any integrity check must see: one character in its middle
    (a state that is not a string: its JSON text, a character changed)."""
    text = state if isinstance(state, str) else orjson.dumps(state).decode()
    if not text:
        return "mcpbench-fuzz"
    middle = len(text) // 2
    return text[:middle] + ("A" if text[middle] != "A" else "B") + text[middle + 1:]


def with_changes(headers: Mapping[str, str] | None, changes: tuple[tuple[str, str | None], ...]) -> dict[str, str]:
    """`headers` (names lower-cased) with `changes` made: a value set, None removed."""
    out = {name.lower(): value for name, value in (headers or {}).items()}
    for name, value in changes:
        out.pop(name.lower(), None)
        if value is not None:
            out[name.lower()] = value
    return out


def expected_refusal(initialize: bytes | None, session_id: str | None, headers: Mapping[str, str], body: bytes,
                     path: str = "/mcp") -> Refused | None:
    """How the core's server rules refuse a POST of `body` with `headers` in a session begun by `initialize`
    (the real server's session id minted again; None: a 2026-07-28 client, which has none), or None when they accept it."""
    oracle = ServerConnection(STREAMABLE_HTTP, path=path, new_session_id=lambda: session_id or "none")
    if initialize is not None:
        oracle.http(HttpRequest(method="POST", target=path, headers={"content-type": "application/json",
                                                                     "accept": "application/json, text/event-stream"}, body=initialize))
    event = oracle.http(HttpRequest(method="POST", target=path, headers=headers, body=body))
    return event if type(event) is Refused else None


__all__ = ["BEFORE_HANDSHAKE", "PROTOCOL_TOOL", "ProtocolCase", "expected_refusal", "protocol_cases", "tampered", "with_changes"]
