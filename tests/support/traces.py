"""Small traces written event by event: a header, messages, and the 2026-07-28 rounds of a multi
round-trip request (SEP-2322) that the trace model's tests doctor one rule at a time."""

from pathlib import Path
from typing import Any, Final

import orjson

HEADER: Final = {"v": 1, "ts": 1.0, "session": None, "transport": "stdio", "dir": None, "kind": "trace",
                 "mcpbench": "0.1.0", "started": "2026-12-02T12:00:00Z", "command": ["server"]}
STATELESS: Final = "2026-07-28"
SAMPLING: Final = {"method": "sampling/createMessage", "params": {"maxTokens": 8, "messages": []}}
ELICIT: Final = {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {"type": "object"}}}


def event(ts: float, session: str, direction: str, msg: dict, **extra: Any) -> dict:
    return {"v": 1, "ts": ts, "session": session, "transport": "stdio", "dir": direction, "kind": "message",
            "msg": msg, **extra}


def write_trace(path: Path, *sessions: list[dict], header: dict | None = None) -> Path:
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in [header or HEADER, *[e for s in sessions for e in s]]))
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


def handshake(ts: float = 1.0, version: str = HANDSHAKE, session: str = "s1") -> list[dict]:
    """initialize, its answer, initialized: a handshake-era session ready to operate."""
    return [
        event(ts, session, "c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "client", "version": "1"}}}),
        event(ts + 0.01, session, "s2c", {"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": version, "capabilities": {"tasks": {"requests": {"tools": {"call": {}}}}},
            "serverInfo": {"name": "server", "version": "1"}}}),
        event(ts + 0.02, session, "c2s", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]


def sent(ts: float, id_: Any, method: str, params: dict | None = None, *, session: str = "s1", direction: str = "c2s") -> dict:
    """Any request."""
    return event(ts, session, direction, {"jsonrpc": "2.0", "id": id_, "method": method, **({"params": params} if params is not None else {})})


def result(ts: float, id_: Any, body: dict, *, session: str = "s1", direction: str = "s2c") -> dict:
    """Any result."""
    return event(ts, session, direction, {"jsonrpc": "2.0", "id": id_, "result": body})


def notified(ts: float, method: str, params: dict, *, session: str = "s1", direction: str = "s2c") -> dict:
    return event(ts, session, direction, {"jsonrpc": "2.0", "method": method, "params": params})


def task_status(task_id: str, status: str) -> dict:
    """A task as tasks/get, tasks/cancel and notifications/tasks/status carry it."""
    return {"taskId": task_id, "status": status, "createdAt": "2026-12-02T12:00:00Z", "ttl": 60000, "pollInterval": 100}


def over_http(message: dict, flow: str, *, session: str = "conn-1") -> dict:
    """A message event of `request`, `done`, … as a sessionless Streamable HTTP exchange `flow` carried it."""
    return {**message, "session": session, "transport": "streamable-http", "flow": flow,
            **({"via": "sse"} if message["dir"] == "s2c" else {})}


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
