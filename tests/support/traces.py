"""The tests' one trace builder: small traces written event by event (a header, messages, a handshake,
tool calls, HTTP exchanges), and the 2026-07-28 rounds of a multi round-trip request (SEP-2322) that the
trace model's tests doctor one rule at a time. A test that writes malformed bytes builds the good part here."""

from pathlib import Path
from typing import Any, Final

import orjson



def header(transport: str = "stdio", *, v: int = 1, ts: float = 1.0, **extra: Any) -> dict:
    """A trace's first line: only the fields every header has, then `extra` (recorder, command, …)."""
    return {"v": v, "ts": ts, "session": None, "transport": transport, "dir": None, "kind": "trace", **extra}


HEADER: Final = header(mcpbench="0.1.0", started="2026-12-02T12:00:00Z", command=["server"])
STATELESS: Final = "2026-07-28"
SAMPLING: Final = {"method": "sampling/createMessage", "params": {"maxTokens": 8, "messages": []}}
ELICIT: Final = {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {"type": "object"}}}


def event(ts: float, session: str | None, direction: str | None, msg: dict | None = None, *, kind: str = "message",
          transport: str = "stdio", v: int = 1, **extra: Any) -> dict:
    """One event; a message carries `msg`, any other kind (stderr, process, http, stream) its `extra` fields."""
    return {"v": v, "ts": ts, "session": session, "transport": transport, "dir": direction, "kind": kind,
            **({"msg": msg} if msg is not None else {}), **extra}


def lines(*events: dict) -> bytes:
    """Events as trace bytes, one line each."""
    return b"".join(orjson.dumps(e) + b"\n" for e in events)


def write_trace(path: Path, *sessions: list[dict], header: dict | None = None) -> Path:
    path.write_bytes(lines(header or HEADER, *[e for s in sessions for e in s]))
    return path


def request(ts: float, id_: Any, name: str = "ask", *, method: str = "tools/call", state: Any = None,
            responses: dict | None = None, capabilities: dict | None = None, session: str = "s1", **params: Any) -> dict:
    """A 2026-07-28 client request (a first round, or a retry with `responses` and `state`)."""
    meta = {"io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {"sampling": {}} if capabilities is None else capabilities}
    body: dict[str, Any] = {"name": name, "arguments": {}, "_meta": meta, **params} if method != "resources/read" else {"uri": name, "_meta": meta, **params}
    if responses is not None:
        body["inputResponses"] = responses
    if state is not None:
        body["requestState"] = state
    return event(ts, session, "c2s", {"jsonrpc": "2.0", "id": id_, "method": method, "params": body})


def asks(ts: float, id_: Any, *, state: Any = None, inputs: dict | None = None, session: str = "s1") -> dict:
    """The server's `input_required` answer."""
    result: dict[str, Any] = {"resultType": "input_required", "inputRequests": {"ask": SAMPLING} if inputs is None else inputs}
    if state is not None:
        result["requestState"] = state
    return event(ts, session, "s2c", {"jsonrpc": "2.0", "id": id_, "result": result})


def done(ts: float, id_: Any, *, result_type: bool = True, session: str = "s1", **extra: Any) -> dict:
    """The server's final answer."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": "done"}], **extra}
    if result_type:
        result["resultType"] = "complete"
    return event(ts, session, "s2c", {"jsonrpc": "2.0", "id": id_, "result": result})


def answered(key: str = "ask") -> dict:
    """`inputResponses` answering `key` with a sampled message."""
    return {key: {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "stub"}}


HANDSHAKE: Final = "2025-11-25"


def handshake(ts: float = 1.0, version: str = HANDSHAKE, session: str = "s1", *, id_: Any = 0, step: float = 0.01,
              capabilities: dict | None = None, server: str = "server", **extra: Any) -> list[dict]:
    """initialize, its answer, initialized (`step` seconds apart): a handshake-era session ready to operate;
    the server answers with `capabilities` (tasks by default) as `server`."""
    caps = {"tasks": {"requests": {"tools": {"call": {}}}}} if capabilities is None else capabilities
    return [
        event(ts, session, "c2s", {"jsonrpc": "2.0", "id": id_, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "client", "version": "1"}}}, **extra),
        event(ts + step, session, "s2c", {"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": version, "capabilities": caps, "serverInfo": {"name": server, "version": "1"}}}, **extra),
        event(ts + 2 * step, session, "c2s", {"jsonrpc": "2.0", "method": "notifications/initialized"}, **extra),
    ]


def tool_call(ts: float, id_: Any, name: str, arguments: dict | None = None, *, session: str = "s1", **extra: Any) -> dict:
    """A tools/call request."""
    return sent(ts, id_, "tools/call", {"name": name, "arguments": arguments or {}}, session=session, **extra)


def tool_text(ts: float, id_: Any, text: str, *, session: str = "s1", **extra: Any) -> dict:
    """A tool's answer of one text."""
    return result(ts, id_, {"content": [{"type": "text", "text": text}], "isError": False}, session=session, **extra)


def sent(ts: float, id_: Any, method: str, params: dict | None = None, *, session: str = "s1", direction: str = "c2s",
         **extra: Any) -> dict:
    """Any request."""
    return event(ts, session, direction, {"jsonrpc": "2.0", "id": id_, "method": method, **({"params": params} if params is not None else {})},
                 **extra)


def result(ts: float, id_: Any, body: dict, *, session: str = "s1", direction: str = "s2c", **extra: Any) -> dict:
    """Any result."""
    return event(ts, session, direction, {"jsonrpc": "2.0", "id": id_, "result": body}, **extra)


def notified(ts: float, method: str, params: dict | None, *, session: str = "s1", direction: str = "s2c", **extra: Any) -> dict:
    return event(ts, session, direction, {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})},
                 **extra)


def task_status(task_id: str, status: str) -> dict:
    """A task as tasks/get, tasks/cancel and notifications/tasks/status carry it."""
    return {"taskId": task_id, "status": status, "createdAt": "2026-12-02T12:00:00Z", "ttl": 60000, "pollInterval": 100}


def over_http(message: dict, flow: str, *, session: str = "conn-1", via: str | None = "sse", **extra: Any) -> dict:
    """A message event of `request`, `done`, … as Streamable HTTP exchange `flow` carried it (sessionless by
    default; an answer `via` SSE unless None), with `extra` fields such as the request's `http`."""
    return {**message, "session": session, "transport": "streamable-http", "flow": flow,
            **({"via": via} if via is not None and message["dir"] == "s2c" else {}), **extra}


def stream_end(ts: float, flow: str, how: str = "close", *, session: str = "conn-1") -> dict:
    """The end of exchange `flow`'s response stream (`close`, or `error` when it broke)."""
    return {"v": 1, "ts": ts, "session": session, "transport": "streamable-http", "dir": "s2c", "kind": "stream",
            "event": how, "method": "POST", "path": "/mcp", "flow": flow, **({"error": "connection reset"} if how == "error" else {})}


def listen(ts: float, id_: Any, **params: Any) -> dict:
    """A 2026-07-28 `subscriptions/listen` request."""
    meta = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
    return event(ts, "s1", "c2s", {"jsonrpc": "2.0", "id": id_, "method": "subscriptions/listen",
                                   "params": {"notifications": {"toolsListChanged": True}, "_meta": meta, **params}})


def on_stream(ts: float, method: str, subscription: Any, **params: Any) -> dict:
    """A notification of a listen stream, tagged with its subscription id."""
    return event(ts, "s1", "s2c", {"jsonrpc": "2.0", "method": method, "params": {
        **params, "_meta": {"io.modelcontextprotocol/subscriptionId": subscription}}})
