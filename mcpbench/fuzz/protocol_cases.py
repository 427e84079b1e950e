"""Protocol cases: bytes a client should not send, sent on the live session, then a `ping` to see it survived.

Each case is one payload written as the transport carries a message (a stdio line, an HTTP POST
body with the session's headers). What the server answers to the payload itself is read (an HTTP
5xx is a crash) but not judged further: servers answer malformed input in many allowed ways. The
`ping` after it is: no answer (hang), the process or connection gone (crash).
"""

from dataclasses import dataclass

import orjson

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

# The case name a protocol finding carries as its tool.
PROTOCOL_TOOL = "(protocol)"


@dataclass(frozen=True)
class ProtocolCase:
    name: str
    payload: bytes

    def shown(self, limit: int = 200) -> str:
        text = self.payload.decode(errors="replace")
        return text if len(text) <= limit else f"{text[:limit]}… ({len(self.payload):,} bytes)"

    def is_json(self) -> bool:
        try:
            orjson.loads(self.payload)
        except orjson.JSONDecodeError:
            return False
        return True


def protocol_cases() -> list[ProtocolCase]:
    return [ProtocolCase(name, payload) for name, payload in PAYLOADS]


__all__ = ["PROTOCOL_TOOL", "ProtocolCase", "protocol_cases"]
