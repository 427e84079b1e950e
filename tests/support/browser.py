"""Open a page in headless Chromium and report how it rendered, over the DevTools protocol.

The protocol runs over a pipe (`--remote-debugging-pipe`: Chromium reads commands
on fd 3 and writes answers and events on fd 4, each a JSON text ended by NUL),
so no websocket library and no port are needed. Every wait is bounded.
"""

import base64
import contextlib
import fcntl
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--remote-debugging-pipe", "--window-size=1200,900",
]
# A busy 2-core machine can take many seconds to start a browser and lay out a page.
STEP_TIMEOUT = 60.0
READ_BYTES = 1 << 20


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        if path := shutil.which(name):
            return path
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


@dataclass
class Rendered:
    """What the page showed: its text, its images, what went wrong, and a screenshot."""

    text: str
    images: list[dict[str, Any]]
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    screenshot: bytes = b""
    checks: Any = None  # what the caller's `script` returned (JSON)


class _Pipe:
    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.write_fd, self.read_fd = write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, orjson.dumps(message) + b"\0")
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            reply = self._next(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str) -> dict:
        deadline = time.monotonic() + STEP_TIMEOUT
        for index, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(index)
        while True:
            event = self._next(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def _next(self, deadline: float) -> dict:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                raise TimeoutError(f"no answer from Chromium within {STEP_TIMEOUT:.0f} s")
            chunk = os.read(self.read_fd, READ_BYTES)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self.buffer += chunk
        text, self.buffer = self.buffer.split(b"\0", 1)
        return orjson.loads(text)


PROBE = """JSON.stringify({
  text: document.body.innerText,
  images: Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete, width: i.naturalWidth, height: i.naturalHeight, scheme: i.src.split(':')[0]})),
  height: document.documentElement.scrollHeight
})"""


def render_page(chromium: str, page: Path) -> Rendered:
    """Load `page` from disk in a fresh headless Chromium; return text, images, errors and a full-page PNG."""
    with launch(chromium) as pipe:
        return _drive(pipe, page)


@contextlib.contextmanager
def launch(chromium: str, *flags: str) -> Iterator[_Pipe]:
    """A fresh headless Chromium (its own profile; `flags` added), driven over its DevTools pipe; closed after."""
    with tempfile.TemporaryDirectory(prefix="mcpbench-chromium-") as profile:
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()

        def child_fds() -> None:  # Chromium expects the pipe on fds 3 (read) and 4 (write)
            high_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4 first
            high_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        proc = subprocess.Popen(
            [chromium, *FLAGS, *flags, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=child_fds, pass_fds=(3, 4),
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        try:
            yield _Pipe(to_chrome_w, from_chrome_r)
        finally:
            try:
                os.write(to_chrome_w, orjson.dumps({"id": 10**6, "method": "Browser.close"}) + b"\0")
            except OSError:
                pass
            try:
                proc.wait(STEP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STEP_TIMEOUT)
            os.close(to_chrome_w)
            os.close(from_chrome_r)


def _drive(pipe: _Pipe, page: Path, width: int = 1200, script: str | None = None) -> Rendered:
    target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        pipe.call(f"{domain}.enable", session=session)
    metrics = {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600}
    pipe.call("Emulation.setDeviceMetricsOverride", metrics, session=session)
    pipe.call("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
    pipe.wait_event("Page.loadEventFired")
    probe = pipe.call("Runtime.evaluate", {"expression": PROBE, "returnByValue": True}, session=session)
    data = orjson.loads(probe["result"]["value"])
    checks = None
    if script is not None:
        checks = orjson.loads(pipe.call("Runtime.evaluate", {"expression": f"JSON.stringify({script})", "returnByValue": True}, session=session)["result"]["value"])
    pipe.call("Emulation.setDeviceMetricsOverride", {**metrics, "height": int(data["height"])}, session=session)
    shot = pipe.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=session)
    rendered = Rendered(text=data["text"], images=data["images"], screenshot=base64.b64decode(shot["data"]), checks=checks)
    for event in pipe.events:
        params = event.get("params", {})
        method = event.get("method")
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            rendered.errors.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            rendered.errors.append("exception: " + str(params.get("exceptionDetails", {}).get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            rendered.errors.append("log: " + str(params["entry"].get("text")))
        elif method == "Network.loadingFailed":
            rendered.errors.append("network: " + str(params.get("errorText")))
        elif method == "Network.requestWillBeSent":
            rendered.requests.append(params.get("request", {}).get("url", "")[:80])
    return rendered


def render_page_at(chromium: str, page: Path, width: int, script: str | None = None) -> Rendered:
    """`render_page` with a viewport `width` px wide (a phone's is about 400), `script` (a JavaScript
    expression) run in the laid-out page and its value, as JSON, in `checks`."""
    with launch(chromium) as pipe:
        return _drive(pipe, page, width, script)
