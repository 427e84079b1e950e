"""The protocol core: JSON-RPC, stdio framing, SSE, sessions, the observer role and version rules.

Free of I/O in the style of h11: nothing here imports sockets, asyncio, gevent,
HTTP clients, mitmproxy or locust (a test checks). Transports are thin shells
around these objects.
"""

from mcpbench.protocol.errors import (
    LocalProtocolError,
    McpbenchError,
    ProtocolError,
    RemoteProtocolError,
    ReplayError,
    TargetError,
    TraceError,
)
from mcpbench.protocol.framing import EOF, NEED_DATA, Line, LineFramer, LineTooLong
from mcpbench.protocol.jsonrpc import (
    Batch,
    ErrorResponse,
    InvalidMessage,
    Message,
    Notification,
    Request,
    Response,
    decode,
    encode,
)
from mcpbench.protocol.observer import BodyObserver, Observed, SseObserver, StdioObserver, read_body
from mcpbench.protocol.session import C2S, S2C, Direction, Exchange, Session, SessionState, Violation
from mcpbench.protocol.sse import SseComment, SseEvent, SseParser, SseTruncated
from mcpbench.protocol.versions import VERSIONS, Era

__all__ = [
    "Batch", "BodyObserver", "C2S", "Direction", "EOF", "Era", "ErrorResponse", "Exchange", "InvalidMessage",
    "Line", "LineFramer", "LineTooLong", "LocalProtocolError", "McpbenchError", "Message",
    "NEED_DATA", "Notification", "Observed", "ProtocolError", "RemoteProtocolError", "ReplayError", "Request",
    "Response", "S2C", "Session", "SessionState", "SseComment", "SseEvent", "SseObserver", "SseParser",
    "SseTruncated", "StdioObserver", "TargetError", "TraceError", "VERSIONS", "Violation", "decode", "encode",
    "read_body",
]
