"""Export an HTTP trace as HAR 1.2, for a browser's network panel.

HAR 1.2: http://www.softwareishard.com/blog/har-12-spec/

One entry per `http` event. Bodies come from the trace: a request's `postData` is its JSON-RPC
message (or the raw body of a violation, or the `body` kept for a non-JSON body); a response's
`content` is its JSON message, or for an SSE stream the events rebuilt with the protocol core's
SSE encoder (messages, comments and other events in their order). Headers are the redacted ones
the trace holds. mcpbench's own fields go under `_mcpbench` (HAR's custom-field convention).
"""

import os
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from mcpbench import __version__
from mcpbench.protocol.errors import LocalProtocolError, TraceError
from mcpbench.protocol.sse import SseComment, SseEvent
from mcpbench.protocol.sse import encode as sse_encode
from mcpbench.trace.format import Kind, to_bytes
from mcpbench.trace.reader import TraceReader

HAR_VERSION = "1.2"


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


def _headers(headers: dict[str, str] | None) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in (headers or {}).items()]


def _text(value: Any) -> str:
    """A trace body (text, or tagged base64) as text for HAR."""
    return to_bytes(value).decode("utf-8", "replace")


class _Parts:
    """What the trace says about one flow before its `http` event."""

    __slots__ = ("request", "response")

    def __init__(self) -> None:
        self.request: list[str] = []
        self.response: list[bytes] = []  # JSON texts, or SSE event bytes


def _entry(http: dict, parts: _Parts | None) -> dict:
    started = http.get("started") or http["ts"]
    responded = http.get("responded") or started
    ended = http.get("ended") or http["ts"]
    url = http.get("url") or http.get("path") or "/"
    version = http.get("http_version") or "HTTP/1.1"
    request: dict[str, Any] = {
        "method": http.get("method") or "GET",
        "url": url,
        "httpVersion": version,
        "cookies": [],
        "headers": _headers(http.get("request_headers")),
        "queryString": [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)],
        "headersSize": -1,
        "bodySize": http.get("request_size", -1),
    }
    request_text = "".join(parts.request) if parts and parts.request else None
    if request_text is not None:
        request["postData"] = {"mimeType": http.get("request_content_type") or "", "text": request_text}
    content_type = http.get("content_type") or ""
    content: dict[str, Any] = {"size": http.get("response_size", 0), "mimeType": content_type}
    if "body" in http:
        content["text"] = _text(http["body"])
    elif parts and parts.response:
        content["text"] = b"".join(parts.response).decode("utf-8", "replace")
    response = {
        "status": http.get("status") or 0,
        "statusText": http.get("reason") or "",
        "httpVersion": version,
        "cookies": [],
        "headers": _headers(http.get("response_headers")),
        "content": content,
        "redirectURL": (http.get("response_headers") or {}).get("location", ""),
        "headersSize": -1,
        "bodySize": http.get("response_size", -1),
    }
    wait = max(0.0, (responded - started) * 1000)
    receive = max(0.0, (ended - responded) * 1000)
    extra = {k: http[k] for k in ("session", "transport", "flow", "mcp", "streamed", "error") if k in http}
    entry = {
        "startedDateTime": _iso(started),
        "time": wait + receive,
        "request": request,
        "response": response,
        "cache": {},
        "timings": {"blocked": -1, "dns": -1, "connect": -1, "send": 0, "wait": wait, "receive": receive, "ssl": -1},
        "_mcpbench": extra,
    }
    if http.get("conn"):
        entry["connection"] = http["conn"]
    if http.get("error"):
        entry["comment"] = f"error: {http['error']}"
    return entry


def to_har(events: Iterable[dict]) -> dict:
    """A HAR document from the events of an HTTP trace (lazily read; bodies joined by `flow`)."""
    open_flows: dict[str, _Parts] = {}
    cut_short: dict[str, dict] = {}  # flow -> the error event of an exchange that may get no http event
    entries = []
    header: dict = {}
    for event in events:
        kind = event["kind"]
        if kind == Kind.TRACE:
            header = event
            continue
        flow = event.get("flow")
        if flow is None:
            continue
        if kind == Kind.HTTP:
            entries.append(_entry(event, open_flows.pop(flow, None)))
            cut_short.pop(flow, None)
            continue
        if kind == Kind.ERROR and "method" in event:  # the exchange may end here (the proxy stopped)
            cut_short[flow] = event
        parts = open_flows.get(flow)
        if parts is None:
            parts = open_flows[flow] = _Parts()
        if kind == Kind.MESSAGE:
            text = orjson.dumps(event["msg"])
            if event.get("dir") == "c2s":
                parts.request.append(text.decode())
            elif "sse" in event:
                sse = event["sse"]
                parts.response.append(sse_encode(SseEvent(data=text.decode(), event=sse.get("event"), id=sse.get("id"))))
            else:
                parts.response.append(text)
        elif kind == Kind.SSE:
            try:
                if "comment" in event:
                    parts.response.append(sse_encode(SseComment(event["comment"])))
                else:
                    item = SseEvent(data=event.get("data"), event=event.get("event"), id=event.get("id"), retry=event.get("retry"))
                    parts.response.append(sse_encode(item))
            except LocalProtocolError:
                pass  # a block with only unknown fields: nothing a browser would show
        elif kind == Kind.VIOLATION and "raw" in event and event.get("dir") == "c2s":
            parts.request.append(_text(event["raw"]))
    for flow, error in cut_short.items():  # kept, with status 0 and the error, as browsers show them
        entries.append(_entry({**error, "error": error.get("detail")}, open_flows.pop(flow, None)))
    entries.sort(key=lambda e: e["startedDateTime"])
    log: dict[str, Any] = {
        "version": HAR_VERSION,
        "creator": {"name": "mcpbench", "version": __version__},
        "entries": entries,
    }
    if open_flows:
        log["comment"] = f"{len(open_flows)} exchange(s) without an http event (the recording stopped first) left out"
    if header.get("started"):
        log["_mcpbench"] = {"started": header["started"], "mode": header.get("mode")}
    return {"log": log}


def export_har(trace: str | os.PathLike, notes: list[str] | None = None) -> bytes:
    """The HAR document of the trace file `trace`, as JSON bytes.

    `notes`, when given, gets what the user should know (a torn last line skipped); the HAR's
    log comment says it too.

    Raises:
        TraceError: the trace cannot be read, or holds no HTTP exchange (a stdio trace, say).
    """
    reader = TraceReader(trace)
    har = to_har(reader)
    if not har["log"]["entries"]:
        if (reader.header or {}).get("transport") == "stdio":
            raise TraceError(f"{trace}: a stdio trace (from `mcpbench tee`) has no HTTP exchanges; "
                             "HAR export takes a trace of `mcpbench record` or the mitmproxy addon")
        raise TraceError(f"{trace}: no HTTP exchange in this trace: nothing to export as HAR")
    if reader.torn:
        log = har["log"]
        log["comment"] = f"{log['comment']}; {reader.torn}" if "comment" in log else reader.torn
        if notes is not None:
            notes.append(reader.torn)
    return orjson.dumps(har, option=orjson.OPT_INDENT_2) + b"\n"
