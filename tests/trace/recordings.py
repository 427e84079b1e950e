"""Made-up HTTP recordings: the events the recording addon writes, full (as version 1 wrote them),
with the odd shapes a writer may be handed mixed in.

`recording(rng, exchanges)` draws everything from `rng`, a `random.Random`: a seeded one made the
committed `data/v1-mixed.jsonl`, Hypothesis's `st.randoms()` draws round-trip cases.
"""

import random
from typing import Any

from tests.support.traces import header as trace_header

UPSTREAMS = ["http://127.0.0.1:8000", "http://127.0.0.1:8000/", None]
SESSIONS = ["2247fd34cfdb", "9c01aa77e2f4", "conn-da934ce3c836", None]
CONNS = ["conn-da934ce3c836", "conn-0b1c2d3e4f50"]
PATHS = ["/mcp", "/messages/?session_id=ab12", "/sse", "/mcp?key=redacted:1a2b3c4d5e6f"]
METHODS = ["POST", "GET", "DELETE"]
TYPES = ["application/json", "text/event-stream", "text/plain; charset=utf-8", None]
STATUSES = [200, 202, 400, 404, 500, 599]
REASONS = ["OK", "Accepted", "Not Found", "Weird"]
# Header names and values the blocks are drawn from: the same few, so that blocks repeat, differ by
# a value, lose a name or come in another order, as a delta has to say.
VALUES = {
    "host": ["127.0.0.1:8000"],
    "accept": ["application/json, text/event-stream", "text/event-stream"],
    "content-type": ["application/json", "text/event-stream", "text/plain"],
    "content-length": ["152", "0", "37"],
    "mcp-session-id": ["2247fd34cfdb", "9c01aa77e2f4"],
    "date": ["Thu, 03 Dec 2026 12:20:21 GMT", "Thu, 03 Dec 2026 12:20:22 GMT"],
    "user-agent": ["python-httpx2/2.16.2"],
    "x-extra": ["1", "2"],
}
NAMES = list(VALUES)


def _block(rng: random.Random, pool: list[dict]) -> dict:
    """A header block: one seen before (the same object, as the addon shares them), a variation of
    one, or a new one."""
    roll = rng.random()
    if pool and roll < 0.5:
        return rng.choice(pool)
    if pool and roll < 0.8:
        block = dict(rng.choice(pool))
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(NAMES)
            if name in block and rng.random() < 0.3:
                del block[name]
            else:
                block[name] = rng.choice(VALUES[name])
        if rng.random() < 0.2:
            items = list(block.items())
            rng.shuffle(items)
            block = dict(items)
    else:
        block = {name: rng.choice(VALUES[name]) for name in rng.sample(NAMES, rng.randint(0, 6))}
    pool.append(block)
    return block


class _Recorder:
    """The events of interleaved exchanges, in the order the addon writes them."""

    def __init__(self, rng: random.Random, header: dict) -> None:
        self.rng = rng
        self.header = header
        self.ts = 1796300422.25
        self.events: list[dict] = []
        self.requests: list[dict] = []
        self.responses: list[dict] = []

    def tick(self) -> float:
        self.ts = round(self.ts + self.rng.randint(1, 5000) / 1e6, 6)
        return self.ts

    def exchange(self, number: int) -> list[dict]:
        """One exchange's events, in the order the addon writes them (times filled in when written)."""
        rng = self.rng
        flow = f"5d8e179b-{number:04d}"
        session = rng.choice(SESSIONS)
        transport = "sse" if rng.random() < 0.2 else self.header["transport"]
        conn, method, path = rng.choice(CONNS), rng.choice(METHODS), rng.choice(PATHS)
        req = _block(rng, self.requests)
        resp = _block(rng, self.responses)
        streamed = rng.random() < 0.5
        status = rng.choice(STATUSES)

        def event(kind: str, direction: str | None, **fields: Any) -> dict:
            return {"session": session, "transport": transport, "dir": direction, "kind": kind, "flow": flow, **fields}

        def message(direction: str, **fields: Any) -> dict:
            block = req if direction == "c2s" else resp
            http = {"method": method, "path": path, "status": status, "content_type": block.get("content-type"), "headers": block}
            if direction == "c2s":
                del http["status"]
            msg = {"jsonrpc": "2.0", "id": number, "method": "tools/call"} if direction == "c2s" else {"jsonrpc": "2.0", "id": number, "result": {}}
            return event("message", direction, http=http, **fields, msg=msg)

        steps = [message("c2s")]
        exchange = {"conn": conn, "method": method, "path": path}
        size = 0
        if streamed:
            steps.append(event("stream", None, event="open", **exchange, status=status, content_type=resp.get("content-type"), headers=resp))
            for _ in range(rng.randint(0, 3)):
                steps.append(message("s2c", sse=rng.choice([{"event": "message"}, {"event": "message", "id": "7"}])))
            if rng.random() < 0.3:
                steps.append(event("sse", "s2c", comment="ping - 2026-12-03"))
            size = rng.randint(0, 900)
            if rng.random() < 0.2:
                steps.append(event("stream", None, event="error", **exchange, events=1, bytes=size, error="client disconnected"))
            else:
                steps.append(event("stream", None, event="close", **exchange, events=1, bytes=size))
        elif rng.random() < 0.8:
            steps.append(message("s2c"))
            length = resp.get("content-length", "")
            size = int(length) if length.isdigit() else 0
        if rng.random() < 0.15:
            steps.append(event("violation", "s2c", code="unknown-answer", detail="no request"))
        answered = rng.random() < 0.9
        if not answered:
            steps.append(event("error", None, detail="upstream refused", **exchange))
        upstream = self.header.get("upstream")
        length = req.get("content-length", "")
        http = event(
            "http", None, conn=conn, mcp=rng.random() < 0.9, method=method,
            url=(upstream.rstrip("/") if upstream and rng.random() < 0.8 else "http://elsewhere:1") + path, path=path,
            http_version=rng.choice(["HTTP/1.1", "HTTP/1.1", "HTTP/2.0"]), request_content_type=req.get("content-type"),
            request_headers=req, request_size=rng.choice([int(length) if length.isdigit() else 0, 17]),
            started="before", status=status if answered else None,
        )
        if answered:
            http.update(reason=rng.choice(REASONS), content_type=resp.get("content-type"), response_headers=resp, responded="before")
            if rng.random() < 0.8:
                http["ended"] = "before"
            if streamed:
                http["streamed"] = True
            http["response_size"] = size if rng.random() < 0.8 else size + 1
            if status >= 400 and rng.random() < 0.5:
                http["body"] = "not found"
        else:
            http["error"] = "upstream refused"
        steps.append(http)
        return steps

    def odd(self, event: dict) -> dict:
        """Now and then, an event of a shape the addon does not write: a field missing or changed
        (to null or another value of its type, so that a reader still takes it)."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.85:
            return event
        names = [name for name in event if name not in ("v", "ts", "session", "transport", "dir", "kind", "flow", "msg")]
        if roll < 0.92 and names:
            del event[rng.choice(names)]
        elif event["kind"] == "message" and roll < 0.96:
            http = event.get("http")
            if rng.random() < 0.3:
                event["http"] = None
            elif type(http) is dict and http:
                http = event["http"] = dict(http)
                del http[rng.choice(list(http))]
        elif event["kind"] in ("violation", "sse"):
            event[rng.choice(["conn", "method", "path"])] = rng.choice(PATHS)  # kept by the flow all the same
        elif names:
            name = rng.choice(names)
            value = event[name]
            changed = {str: "x", int: 404, float: 1.5, bool: not value, dict: {}}.get(type(value), None)
            event[name] = None if rng.random() < 0.3 else changed
        return event


def recording(rng: random.Random, exchanges: int, *, odd: bool = True) -> list[dict]:
    """A trace's events, the header first, as version 1 wrote them; `odd`: odd shapes mixed in."""
    upstream = rng.choice(UPSTREAMS)
    header = trace_header("streamable-http", ts=1796300422.25, mcpbench="0.1.0", started="2026-12-03T12:20:22.250000Z",
                          recorder="mitmproxy")
    if upstream is not None:
        header["upstream"] = upstream
    recorder = _Recorder(rng, header)
    pending = [recorder.exchange(number) for number in range(1, exchanges + 1)]
    events = [header]
    open_ = []
    while pending or open_:
        if pending and (not open_ or rng.random() < 0.4):
            open_.append(pending.pop(0))
        steps = rng.choice(open_)
        event = steps.pop(0)
        if not steps:
            open_.remove(steps)
        event = {"v": 1, "ts": recorder.tick(), **event}
        for name in ("started", "responded", "ended"):
            if event.get(name) == "before":
                event[name] = round(event["ts"] - rng.randint(0, 3000) / 1e6, 6)
        events.append(recorder.odd(event) if odd else event)
    return events
