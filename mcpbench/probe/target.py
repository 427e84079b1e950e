"""The endpoint under probe: first contact (reachable? MCP? credentials?) and what every check needs to know.

`reach` makes one session with the newest handshake version and learns the negotiated version,
whether the server keeps sessions (an `Mcp-Session-Id`) and streams its answers (SSE), its tools,
and the call that reports progress (`--progress-tool`, else the lab's `slow` when the server has it).
An endpoint that cannot be reached, does not answer, or is not MCP is a `TargetError` (exit 3);
one that asks for credentials (401, 403) is probed for its authentication shape only.
"""

import json
import time
from dataclasses import dataclass, field

from mcpbench.probe.sessions import ProbeExchange, ProbeSession, new_session
from mcpbench.probe.wire import Wire
from mcpbench.protocol.errors import BadTargetError, TargetError
from mcpbench.protocol.http import Failure, is_event_stream
from mcpbench.protocol.transports import LEGACY_SSE, STDIO
from mcpbench.protocol.versions import LATEST_HANDSHAKE
from mcpbench.system.target import parse_target

# Calls first contact makes in its session: a deployment that does not keep sessions on one
# instance loses one of them (strict round-robin, the second request; random over 3, all but 1 in 27).
FIRST_CALLS = 3
# The lab's reference server reports progress from its `slow` tool: 8 steps over 2 s show a
# buffering proxy (all 8 at the end) and leave room for two cuts and two resumptions.
LAB_PROGRESS = ("slow", {"seconds": 2, "steps": 8})
AUTH_STATUSES = (401, 403)


@dataclass(frozen=True, slots=True)
class ProgressCall:
    """A tool call whose answer comes after several progress notifications."""

    tool: str
    arguments: dict

    @classmethod
    def parse(cls, text: str) -> "ProgressCall":
        """`NAME` or `NAME {"json": "arguments"}`.

        Raises:
            BadTargetError: the arguments are not a JSON object (names the option).
        """
        name, _, rest = text.strip().partition(" ")
        if not name:
            raise BadTargetError("--progress-tool: give a tool name, then optionally its arguments as a JSON object")
        try:
            arguments = json.loads(rest) if rest.strip() else {}
        except ValueError as exc:
            raise BadTargetError(f"--progress-tool {text!r}: the arguments are not JSON ({exc})") from None
        if not isinstance(arguments, dict):
            raise BadTargetError(f"--progress-tool {text!r}: the arguments must be a JSON object")
        return cls(name, arguments)

    def params(self, token: str) -> dict:
        return {"name": self.tool, "arguments": self.arguments, "_meta": {"progressToken": token}}


@dataclass
class ProbeSettings:
    """How much each check does: from the command line, defaults as `mcpbench probe` documents them."""

    sessions: int = 50
    calls: int = 5
    spike: int = 100
    idle: float | None = None  # seconds: check 6 watches idle streams this long (None: off)
    direct: str | None = None  # the same server without the deployment in front (check 5)
    progress: ProgressCall | None = None


@dataclass
class ProbeTarget:
    """What the checks probe, as first contact found it."""

    url: str
    transport: str
    wire: Wire
    settings: ProbeSettings
    version: str | None = None  # the version the handshake settled
    keeps_sessions: bool = True  # the server named an Mcp-Session-Id (legacy: always)
    affinity: bool = True  # every request of first contact's session reached an instance that knew it
    # (sessions that lost their instance, sessions run), as the sessions check measured (None: not run).
    # It, not first contact's one session, decides whether a check needing one session to stay can run.
    sessions_lost: tuple[int, int] | None = None
    streams: bool = True  # answers come as SSE streams (not JSON bodies)
    tools: list[str] = field(default_factory=list)
    progress: ProgressCall | None = None
    server: dict = field(default_factory=dict)  # serverInfo
    auth_status: int | None = None  # 401/403 at first contact: credentials missing or refused
    auth_challenge: str | None = None  # its WWW-Authenticate
    discovered: dict | None = None  # 2026-07-28's `server/discover` as the first check that asked saw it (probe/newest.py)

    @property
    def legacy(self) -> bool:
        return self.transport == LEGACY_SSE

    def unsettled(self) -> str | None:
        """Why a check that needs one session to stay put cannot run here, or None.

        What the sessions check measured decides; without it (not run), first contact's session:
        behind a balancer that keeps 1 session in 3, first contact's alone stays 1 time in 3.
        """
        if not self.keeps_sessions:
            return None
        if self.sessions_lost is not None and self.sessions_lost[1]:
            lost, ran = self.sessions_lost
            if lost:
                return (f"{lost} of {ran} sessions lost the instance that held them (see the sessions check): "
                        "a check needing one session to stay is not measurable")
            return None
        if not self.affinity:
            return ("first contact's session lost the instance that held it (the sessions check measures how many do): "
                    "a check needing one session to stay is not measurable")
        return None

    def session(self, version: str | None = None) -> ProbeSession:
        return new_session(self.wire, self.transport, version or self.version or LATEST_HANDSHAKE)


def parse_url(url: str) -> tuple[str, str]:
    """(transport, URL) of an HTTP probe target.

    Raises:
        BadTargetError: not an http(s):// or sse+http(s):// URL (exit 2).
    """
    target = parse_target(url)
    if target.transport == STDIO:
        raise BadTargetError(f"{url!r}: the probe checks an HTTP deployment; give http(s)://HOST/mcp or sse+http(s)://HOST/sse")
    return target.transport, target.url


def reach(url: str, wire: Wire, settings: ProbeSettings, *, deadline: float) -> ProbeTarget:
    """First contact: one session, its tools, then it is ended.

    Raises:
        TargetError: unreachable, no answer in time, or not an MCP endpoint (exit 3).
    """
    transport, _ = parse_url(url)
    target = ProbeTarget(url, transport, wire, settings, progress=settings.progress)
    session = target.session(LATEST_HANDSHAKE)
    try:
        ex = session.open(deadline=deadline)
        if ex.status in AUTH_STATUSES:
            target.auth_status = ex.status
            target.auth_challenge = ex.headers.get("www-authenticate") if ex.headers is not None else None
            return target
        failure = ex.failure()
        if failure is not None and failure[0] == Failure.SESSION_NOT_FOUND and target.legacy:
            target.affinity = False  # the stream named an endpoint (it is MCP); the POST reached another instance
            return target
        if failure is not None:
            raise TargetError(_not_mcp(url, ex))
        result = ex.result or {}
        target.version = result.get("protocolVersion")
        target.server = result.get("serverInfo") or {}
        target.keeps_sessions = target.legacy or bool(session.session_id)
        target.streams = target.legacy or (ex.reader is not None and is_event_stream(ex.reader.answer.content_type))
        for _ in range(FIRST_CALLS):
            listed = session.call("tools/list", deadline=deadline)
            if (failure := listed.failure()) is not None:
                target.affinity = failure[0] != Failure.SESSION_NOT_FOUND
                break
            target.tools = target.tools or [t.get("name") for t in listed.result.get("tools", []) if isinstance(t, dict)]
        if target.progress is None and LAB_PROGRESS[0] in target.tools:
            target.progress = ProgressCall(*LAB_PROGRESS)
        session.end(deadline=time.monotonic() + wire.options.timeout)
        return target
    finally:
        session.close()


# 421 Misdirected Request: how the SDKs refuse a Host they do not allow (DNS-rebinding protection).
MISDIRECTED = 421


def _not_mcp(url: str, ex: ProbeExchange) -> str:
    failure = ex.failure()
    detail = failure[1] if failure else "no answer"
    if ex.status is None:
        return detail  # it names the URL
    if ex.status == MISDIRECTED:  # an MCP server refusing the Host it got: a proxy in front rewrote it
        return (f"{url}: initialize got {detail}: the server refused the Host it received (its DNS-rebinding check); "
                "behind a proxy that rewrites Host, have the proxy pass the client's Host through, or allow the proxy's "
                "Host on the server (its allowed hosts)")
    return f"{url} is not an MCP endpoint: initialize got {detail}"


__all__ = ["AUTH_STATUSES", "ProgressCall", "ProbeSettings", "ProbeTarget", "parse_url", "reach"]
