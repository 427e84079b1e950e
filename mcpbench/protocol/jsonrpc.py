"""JSON-RPC 2.0 messages as MCP uses them: classify, validate, encode.

A message is one of `Request`, `Notification`, `Response`, `ErrorResponse` or
`Batch`. `decode()` turns bytes into one of them or raises `InvalidMessage`
with a reason a person can act on; `encode()` turns one back into bytes.

JSON-RPC 2.0: https://www.jsonrpc.org/specification
MCP basic protocol: https://modelcontextprotocol.io/specification/2025-11-25/basic
"""

import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from mcpbench.protocol.errors import RemoteProtocolError

MessageId = str | int

JSONRPC_VERSION = "2.0"

# JSON-RPC 2.0 §5.1 reserved error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class InvalidMessage(RemoteProtocolError):
    """Bytes that are not a valid JSON-RPC 2.0 message; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotJson(InvalidMessage):
    """Bytes that are not JSON at all (on a stdio server's stdout: pollution)."""


# Messages are slotted dataclasses, treated as immutable but not `frozen=True`:
# a frozen constructor costs about 1 µs more per message, a tenth of what the
# stdio tee may spend on one line in all (issue 2: ≥ 100,000 messages/s).
@dataclass(slots=True, kw_only=True)
class Message:
    """Base of every JSON-RPC message. Never instantiated itself."""


def _check_id(value: Any, *, allow_null: bool = False) -> str | None:
    # MCP (all versions): "Unlike base JSON-RPC, the ID MUST NOT be null" for
    # requests; error responses may carry null when the request id was unreadable.
    if value is None:
        return None if allow_null else "id must not be null"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return f"id must be a string or an integer, not {type(value).__name__}"
    return None


def _check_params(params: Any) -> str | None:
    if params is not None and not isinstance(params, dict):
        return f"params must be an object, not {type(params).__name__}"
    return None


@dataclass(slots=True, kw_only=True)
class Request(Message):
    """A call that expects an answer with the same `id`."""

    id: MessageId
    method: str
    params: dict[str, Any] | None = None
    _parsed: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self._parsed:
            reason = _check_id(self.id) or _check_params(self.params)
            if reason is None and not isinstance(self.method, str):
                reason = "method must be a string"
            if reason:
                raise InvalidMessage(reason)


@dataclass(slots=True, kw_only=True)
class Notification(Message):
    """A one-way message: no `id`, no answer."""

    method: str
    params: dict[str, Any] | None = None
    _parsed: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self._parsed:
            reason = _check_params(self.params)
            if reason is None and not isinstance(self.method, str):
                reason = "method must be a string"
            if reason:
                raise InvalidMessage(reason)


@dataclass(slots=True, kw_only=True)
class Response(Message):
    """A successful answer to the request with the same `id`."""

    id: MessageId
    result: Any
    _parsed: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self._parsed and (reason := _check_id(self.id)):
            raise InvalidMessage(reason)


@dataclass(slots=True, kw_only=True)
class ErrorResponse(Message):
    """A failed answer; `id` is None when the server could not read the request's id."""

    id: MessageId | None
    code: int
    message: str
    data: Any = None
    _parsed: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self._parsed:
            reason = _check_id(self.id, allow_null=True)
            if reason is None and (isinstance(self.code, bool) or not isinstance(self.code, int)):
                reason = "error.code must be an integer"
            if reason is None and not isinstance(self.message, str):
                reason = "error.message must be a string"
            if reason:
                raise InvalidMessage(reason)


@dataclass(slots=True, kw_only=True)
class Batch(Message):
    """A JSON-RPC batch: only the 2025-03-26 revision of MCP allows one."""

    items: tuple[Message, ...]


Answer = Response | ErrorResponse

_new = object.__new__


def decode(data: bytes | bytearray | memoryview | str) -> Message:
    """Parse one JSON-RPC message (or batch) from its JSON text.

    Raises:
        InvalidMessage: the text is not JSON, or not a valid JSON-RPC 2.0 message.
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise NotJson(f"not JSON: {exc}") from None
    return from_obj(obj)


def from_obj(obj: Any) -> Message:
    """Classify an already-parsed JSON value as a JSON-RPC message.

    Raises:
        InvalidMessage: with the reason the value is not a valid message.
    """
    if type(obj) is not dict:  # the rare cases first, so the common one pays one check
        return _from_other(obj)
    if obj.get("jsonrpc") != JSONRPC_VERSION:
        raise InvalidMessage('"jsonrpc" must be "2.0"')
    method = obj.get("method")
    if method is not None:
        if type(method) is not str:
            raise InvalidMessage("method must be a string")
        params = obj.get("params")
        if params is not None and type(params) is not dict:
            raise InvalidMessage(_check_params(params))
        # Already checked: build without the dataclass constructor, which costs
        # half a microsecond more per message on the tee's hot path; one store per field, as a
        # tuple assignment builds and unpacks a tuple (~0.1 µs more).
        if "id" not in obj:
            message = _new(Notification)
            message.method = method
            message.params = params
            message._parsed = True
            return message
        ident = obj["id"]
        # the usual id passes on two C-level type tests; anything else (a bool too: its type is
        # bool, not int) gets `_check_id`'s verdict and reason
        if type(ident) is not int and type(ident) is not str and (reason := _check_id(ident)):
            raise InvalidMessage(reason)
        message = _new(Request)
        message.id = ident
        message.method = method
        message.params = params
        message._parsed = True
        return message
    return _from_answer(obj)


def _from_other(obj: Any) -> Message:
    """A batch, or a reason why `obj` is no message."""
    if isinstance(obj, list):
        if not obj:
            raise InvalidMessage("empty batch")
        items = []
        for index, item in enumerate(obj):
            if isinstance(item, list):
                raise InvalidMessage(f"batch item {index}: nested batch")
            try:
                items.append(from_obj(item))
            except InvalidMessage as exc:
                raise InvalidMessage(f"batch item {index}: {exc.reason}") from None
        return Batch(items=tuple(items))
    if isinstance(obj, dict):  # a dict subclass: not from a JSON parser, but valid
        return from_obj(dict(obj))
    raise InvalidMessage(f"not a JSON-RPC object: a JSON {type(obj).__name__}")


def _from_answer(obj: dict) -> Message:
    """A response or error response (an object without `method`)."""
    has_result = "result" in obj
    error = obj.get("error")
    if has_result and error is not None:
        raise InvalidMessage("a response must not carry both result and error")
    if has_result:
        ident = obj.get("id")
        if type(ident) is not int and type(ident) is not str and (reason := _check_id(ident)):
            raise InvalidMessage(f"response {reason}")
        message = _new(Response)
        message.id = ident
        message.result = obj["result"]
        message._parsed = True
        return message
    if error is not None:
        if not isinstance(error, dict):
            raise InvalidMessage("error must be an object")
        if reason := _check_id(obj.get("id"), allow_null=True):
            raise InvalidMessage(f"error response {reason}")
        # ErrorResponse's constructor checks code and message.
        return ErrorResponse(
            id=obj.get("id"), code=error.get("code"), message=error.get("message"), data=error.get("data")
        )
    raise InvalidMessage("neither a request (method) nor a response (result or error)")


def to_obj(message: Message) -> Any:
    """The JSON value of `message`, ready for orjson."""
    match message:
        case Request(id=id_, method=method, params=params):
            obj: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "id": id_, "method": method}
            if params is not None:
                obj["params"] = params
            return obj
        case Notification(method=method, params=params):
            obj = {"jsonrpc": JSONRPC_VERSION, "method": method}
            if params is not None:
                obj["params"] = params
            return obj
        case Response(id=id_, result=result):
            return {"jsonrpc": JSONRPC_VERSION, "id": id_, "result": result}
        case ErrorResponse(id=id_, code=code, message=text, data=data):
            error: dict[str, Any] = {"code": code, "message": text}
            if data is not None:
                error["data"] = data
            return {"jsonrpc": JSONRPC_VERSION, "id": id_, "error": error}
        case Batch(items=items):
            return [to_obj(item) for item in items]
    raise TypeError(f"not a JSON-RPC message: {message!r}")


def encode(message: Message) -> bytes:
    """Compact JSON bytes of `message`, no trailing newline.

    orjson refuses integers past 64 bits, which JSON allows (a fuzzer's boundary number, -2**63 - 1,
    in a tool's arguments): those messages are written by the standard library instead.
    """
    obj = to_obj(message)
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()

