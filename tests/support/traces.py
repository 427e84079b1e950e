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
