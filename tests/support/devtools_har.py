"""A HAR of what headless Chromium's page did, from its DevTools protocol's Network events.

Chromium writes HAR in its DevTools front end (devtools-frontend's `HARWriter`/`HARLog`), from the
Network domain's events: this does the same, field for field where the front end fills them
(`startedDateTime` from `wallTime`, `timings` from the response's `timing`, headers as sent from
the `ExtraInfo` events, `connection`, `serverIPAddress`, bodies from `Network.getResponseBody` and
`Network.getRequestPostData`, `_resourceType`), so `mcpbench trace import --har` meets what a user
saves from the network panel.
"""

import base64
import time
from datetime import UTC, datetime
from typing import Any

from tests.support.browser import STEP_TIMEOUT, launch

NETWORK_EVENTS = ("Network.requestWillBeSent", "Network.requestWillBeSentExtraInfo", "Network.responseReceived",
                  "Network.responseReceivedExtraInfo", "Network.loadingFinished", "Network.loadingFailed")


def _headers(block: dict | None) -> list[dict[str, str]]:
    out = []
    for name, value in (block or {}).items():
        for line in str(value).split("\n"):  # DevTools joins repeated headers with newlines
            out.append({"name": name, "value": line})
    return out


def _iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(wall % 1 * 1000):03d}Z"


def page_session_har(chromium: str, origin: str, script: str) -> tuple[dict, Any]:
    """Open `origin` + "/page" in headless Chromium, run `script` (an async JS expression) in it,
    and return (the HAR of every request the page made, the script's value)."""
    with launch(chromium) as pipe:
        target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        pipe.call("Page.enable", session=session)
        pipe.call("Network.enable", {"maxTotalBufferSize": 10_000_000, "maxResourceBufferSize": 5_000_000}, session=session)
        pipe.call("Page.navigate", {"url": origin + "/page"}, session=session)
        pipe.wait_event("Page.loadEventFired")
        value = pipe.call("Runtime.evaluate", {"expression": script, "awaitPromise": True, "returnByValue": True}, session=session)
        if "exceptionDetails" in value:
            raise RuntimeError(f"the page's script failed: {value['exceptionDetails']}")
        har = _har(pipe, session)
        return har, value["result"].get("value")


def _har(pipe, session: str) -> dict:
    requests: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:  # every request the page made has finished (or failed): the script awaited them
        for event in pipe.events:
            if event.get("method") in NETWORK_EVENTS:
                params = event["params"]
                requests.setdefault(params["requestId"], {})[event["method"].split(".", 1)[1]] = params
        pipe.events = [e for e in pipe.events if e.get("method") not in NETWORK_EVENTS]
        if requests and all("loadingFinished" in r or "loadingFailed" in r for r in requests.values() if "requestWillBeSent" in r):
            break
        if time.monotonic() > deadline:
            raise TimeoutError("Chromium did not finish the page's requests")
        pipe.call("Runtime.evaluate", {"expression": "1"}, session=session)  # reads the events queued meanwhile
    entries = []
    for request_id, parts in requests.items():
        if "requestWillBeSent" in parts:
            entries.append(_entry(pipe, session, request_id, parts))
    entries.sort(key=lambda e: e["startedDateTime"])
    return {"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"}, "pages": [], "entries": entries}}


def _entry(pipe, session: str, request_id: str, parts: dict) -> dict:
    sent = parts["requestWillBeSent"]
    request = sent["request"]
    response = (parts.get("responseReceived") or {}).get("response") or {}
    finished = parts.get("loadingFinished") or parts.get("loadingFailed") or {}
    timing = response.get("timing") or {}
    request_headers = (parts.get("requestWillBeSentExtraInfo") or {}).get("headers") or request.get("headers")
    response_headers = (parts.get("responseReceivedExtraInfo") or {}).get("headers") or response.get("headers")
    har_request: dict[str, Any] = {
        "method": request["method"], "url": request["url"], "httpVersion": response.get("protocol", "http/1.1"),
        "headers": _headers(request_headers), "queryString": [], "cookies": [], "headersSize": -1, "bodySize": 0,
    }
    if request.get("hasPostData"):
        text = request.get("postData")
        if text is None:
            text = pipe.call("Network.getRequestPostData", {"requestId": request_id}, session=session)["postData"]
        har_request["postData"] = {"mimeType": (request.get("headers") or {}).get("Content-Type", ""), "text": text}
        har_request["bodySize"] = len(text.encode())
    content: dict[str, Any] = {"size": 0, "mimeType": response.get("mimeType", "x-unknown")}
    if response and "loadingFinished" in parts:
        try:
            body = pipe.call("Network.getResponseBody", {"requestId": request_id}, session=session)
            content["text"] = body["body"]
            if body.get("base64Encoded"):
                content["encoding"] = "base64"
            content["size"] = len(base64.b64decode(body["body"]) if body.get("base64Encoded") else body["body"].encode())
        except RuntimeError:
            pass  # no body kept (DevTools' HAR leaves `text` out then)
    send = max(0.0, timing.get("sendEnd", 0) - timing.get("sendStart", 0))
    wait = max(0.0, timing.get("receiveHeadersEnd", 0) - timing.get("sendEnd", 0))
    end = finished.get("timestamp", timing.get("requestTime", sent["timestamp"]))
    receive = max(0.0, (end - timing.get("requestTime", sent["timestamp"])) * 1000 - timing.get("receiveHeadersEnd", 0))
    blocked = max(0.0, timing.get("sendStart", 0))
    har_response = {
        "status": response.get("status", 0), "statusText": response.get("statusText", ""),
        "httpVersion": response.get("protocol", "http/1.1"), "headers": _headers(response_headers), "cookies": [],
        "content": content, "redirectURL": "", "headersSize": -1, "bodySize": finished.get("encodedDataLength", -1),
    }
    entry = {
        "_resourceType": sent.get("type", "Other").lower(), "cache": {},
        "connection": str(response.get("connectionId", "")), "request": har_request, "response": har_response,
        "serverIPAddress": str(response.get("remoteIPAddress", "")).strip("[]"),
        "startedDateTime": _iso(sent["wallTime"]), "time": blocked + send + wait + receive,
        "timings": {"blocked": blocked, "dns": -1, "ssl": -1, "connect": -1, "send": send, "wait": wait, "receive": receive},
    }
    if "loadingFailed" in parts:
        entry["response"]["status"] = 0
        entry["comment"] = parts["loadingFailed"].get("errorText", "")
    return entry
