"""The trace format: one JSON object per line (docs/trace-format.md).

Every event has `v`, `ts` (epoch seconds, µs precision), `session`,
`transport`, `dir` and `kind`; `session` and `dir` are null where they do not
apply (the header, a process exit). Bytes that are not UTF-8 are stored as
`{"b64": "…"}`.
"""

import base64
import time

# 2: events of an HTTP flow leave out what earlier lines of the file said (`trace/compact.py`);
# readers restore it, and still read version 1.
FORMAT_VERSION = 2

# The UTF-8 byte order mark some editors put at the start of a text file.
BOM = b"\xef\xbb\xbf"


class Kind:
    """The `kind` of a trace event."""

    TRACE = "trace"  # header: first line of every file
    MESSAGE = "message"  # one JSON-RPC message, in `msg`
    VIOLATION = "violation"  # a broken rule: `code`, `detail`, optional `raw`
    WARNING = "warning"  # allowed, but worth knowing (a peer's quirk): `code`, `detail`
    STDERR = "stderr"  # one line the server wrote on stderr: `text`
    PROCESS = "process"  # `event`: start | exit, `argv`, `pid`, `exit_code`, `signal`
    HTTP = "http"  # one HTTP exchange: method, path, status, headers, content_type
    STREAM = "stream"  # an SSE stream: `event` open | close | error, plus HTTP context
    SSE = "sse"  # an SSE event or comment that carried no JSON-RPC message
    ERROR = "error"  # the recorder itself hit a problem (upstream down, client gone)


def now() -> float:
    """Wall-clock timestamp with µs precision (integer division: cheaper than round())."""
    return time.time_ns() // 1000 / 1e6


def text_or_b64(data: bytes) -> str | dict:
    """`data` as text when it is UTF-8, else as a tagged base64 object."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(data).decode("ascii")}


def to_bytes(value: str | dict) -> bytes:
    """The inverse of `text_or_b64`."""
    if isinstance(value, dict):
        return base64.b64decode(value["b64"])
    return value.encode("utf-8")
