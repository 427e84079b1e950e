"""Trace events → sessions, one event at a time: what `inspect` and the live view both show.

Requests are paired with their answers by the protocol core's `Session`, the same one the
recorders use; the violations shown are the ones the recorder wrote, so nothing is counted twice.
`Rebuild.take` takes the events of a whole trace (`inspect`) or of one that is still growing (the
live view, through `trace/follow.py`) and says what each one added: the timeline entries it made
and the requests it answered.
"""

from dataclasses import dataclass, field
from typing import Any

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.auth import bearer_challenge
from mcpbench.protocol.http import AUTH_FAILURES, AUTHENTICATE, classify_status
from mcpbench.protocol.jsonrpc import ErrorResponse, InvalidMessage, Notification, Request, Response
from mcpbench.protocol.session import CLOSED, LOST, Direction, Exchange, Session, Trigger
from mcpbench.protocol.transports import LEGACY_SSE
from mcpbench.protocol.versions import INPUT_REQUESTS, asks_for_input, step_name
from mcpbench.trace.format import Kind

# The HTTP status that says the server no longer knows a session (both HTTP transports).
SESSION_NOT_FOUND = 404


def outcome(answer: Response | ErrorResponse) -> tuple[str, str]:
    """("ok" | "tool-error" | "error" | "input-required", detail) of an answer."""
    if isinstance(answer, ErrorResponse):
        return "error", f"{answer.code}: {answer.message}"
    result = answer.result
    if asks_for_input(result):
        return "input-required", ", ".join(sorted(result.get(INPUT_REQUESTS) or {}))
    if isinstance(result, dict) and result.get("isError") is True:
        texts = [c.get("text", "") for c in result.get("content") or () if isinstance(c, dict)]
        return "tool-error", " ".join(texts)[:120]
    return "ok", ""


@dataclass(slots=True)
class Entry:
    """One line of a session's timeline."""

    ts: float
    dir: str | None
    kind: str  # request | notification | violation | stderr | http | stream | error | process
    name: str
    latency: float | None = None  # seconds, requests only
    outcome: str = ""
    detail: str = ""
    id: Any = None  # a request's JSON-RPC id
    flow: Any = None  # the HTTP exchange that carried a request (HTTP traces)


@dataclass
class SessionReport:
    id: str
    transport: str
    start: float
    entries: list[Entry] = field(default_factory=list)
    session: Session = field(default_factory=Session)
    exit_code: int | None = None
    requests: int = 0  # requests seen (kept or not)
    open_calls: dict[tuple[str, Any], Entry] = field(default_factory=dict)

    @property
    def calls(self) -> list[Entry]:
        return [e for e in self.entries if e.kind == "request"]

    def of_kind(self, kind: str) -> list[Entry]:
        return [e for e in self.entries if e.kind == kind]


@dataclass(slots=True)
class Step:
    """What one trace event did to its session: the entries it added, the requests it answered
    (their `latency` and `outcome` now set)."""

    session: SessionReport
    added: list[Entry]
    answered: list[Entry]


class Rebuild:
    """Sessions rebuilt from trace events as they come.

    Args:
        keep: keep each session's timeline in `SessionReport.entries` (`inspect`); without it the
            caller keeps what `take` returns for as long as it wants (a live view, bounded).
    """

    def __init__(self, *, keep: bool = True) -> None:
        self.keep = keep
        self.sessions: dict[str, SessionReport] = {}

    def take(self, event: dict[str, Any]) -> Step | None:
        """Take one trace event; None for the header."""
        kind = event["kind"]
        if kind == Kind.TRACE:
            return None
        key = event.get("session") or "-"
        sessions = self.sessions
        alias = event.get("conn_session")
        if alias and alias != key and key not in sessions and alias in sessions:
            # A legacy GET /sse stream opens under its connection's key; its `endpoint` event
            # names the session: one session, not an empty one per stream.
            self.sessions = sessions = {key if name == alias else name: value for name, value in sessions.items()}
            sessions[key].id = key
        report = sessions.get(key)
        if report is None:
            report = sessions[key] = SessionReport(key, event.get("transport", "?"), event["ts"])
        step = Step(report, [], [])
        _take(step, event)
        if self.keep and step.added:
            report.entries += step.added
        return step

    def forget(self, key: str) -> None:
        """Drop a session (a live view keeps a bounded number)."""
        self.sessions.pop(key, None)

    def finish(self) -> None:
        """The trace is read to its end: the calls still open were never answered."""
        for report in self.sessions.values():
            for entry in report.open_calls.values():
                entry.outcome = "unanswered"


def _take(step: Step, event: dict[str, Any]) -> None:
    report, added = step.session, step.added
    kind, ts, direction = event["kind"], event["ts"], event.get("dir")
    if kind == Kind.MESSAGE:
        try:
            message = jsonrpc.from_obj(event.get("msg"))
        except InvalidMessage as exc:
            added.append(Entry(ts, direction, "violation", "invalid-message", detail=exc.reason))
            return
        _message(step, message, Direction(direction), ts, event.get("flow"))
    elif kind == Kind.VIOLATION:
        added.append(Entry(ts, direction, "violation", event.get("code", "?"), detail=event.get("detail", "")))
    elif kind == Kind.STDERR:
        text = event.get("text")
        added.append(Entry(ts, direction, "stderr", "stderr", detail=text if isinstance(text, str) else "<binary>"))
    elif kind == Kind.PROCESS:
        if event.get("event") == "exit":
            report.exit_code = event.get("exit_code")
            report.session.close("the server process exited")
        added.append(Entry(ts, None, "process", event.get("event", "?"), detail=str(event.get("exit_code", event.get("argv", "")))))
    elif kind == Kind.HTTP:
        status = event.get("status")
        if status is not None and status >= 400:
            outcome, detail = str(status), ""
            challenge = bearer_challenge((event.get("response_headers") or {}).get(AUTHENTICATE))
            failure = classify_status(status, has_session=False, challenge=challenge)
            if failure in AUTH_FAILURES:  # the request it refused: that is its outcome, with what the server asked for
                outcome, detail = f"{status} {failure}", challenge.summary() if challenge else "no challenge"
                _refused(report, event.get("flow"), failure, detail)
            added.append(Entry(ts, direction, "http", f"{event.get('method')} {event.get('path')}", outcome=outcome, detail=detail))
            if status == SESSION_NOT_FOUND and event.get("session"):
                report.session.lose(Trigger.SESSION_NOT_FOUND, f"HTTP {status}")
        elif status is not None and event.get("method") == "DELETE":
            report.session.close("DELETE")
    elif kind == Kind.STREAM:
        step_ = event.get("event", "?")
        if event.get("method") == "POST" and step_ in ("open", "close"):
            return  # one per SSE answer: the request line already shows it
        if report.transport == LEGACY_SSE and event.get("method") == "GET" and step_ in ("close", "error"):
            report.session.lose(Trigger.STREAM_ENDED, step_)  # a legacy session lives on its stream
        name = f"{event.get('method', '')} {event.get('path', '')} stream {step_}".strip()
        added.append(Entry(ts, direction, kind, name, detail=event.get("error") or event.get("reason") or ""))
    elif kind == Kind.ERROR:
        added.append(Entry(ts, direction, kind, event.get("code") or kind, detail=event.get("detail") or event.get("error") or ""))


def _refused(report: SessionReport, flow: Any, failure: str, detail: str) -> None:
    """The requests of exchange `flow` got no answer but `failure` (an authentication refusal)."""
    for key, entry in list(report.open_calls.items()):
        if flow is not None and entry.flow == flow:
            entry.outcome, entry.detail = failure, detail
            del report.open_calls[key]


def _message(step: Step, message: jsonrpc.Message, direction: Direction, ts: float, flow: Any = None) -> None:
    report = step.session
    items = message.items if isinstance(message, jsonrpc.Batch) else (message,)
    for item in items:
        if isinstance(item, Request):
            entry = Entry(ts, direction.value, "request", step_name(item.method, item.params), id=item.id, flow=flow)
            step.added.append(entry)
            report.requests += 1
            report.open_calls[(direction.value, item.id)] = entry
        elif isinstance(item, Notification):
            step.added.append(Entry(ts, direction.value, "notification", item.method))
    for result in report.session.observe(direction, message, ts):
        if isinstance(result, Exchange):
            entry = report.open_calls.pop((result.direction.value, result.request.id), None)
            if entry is not None:
                entry.latency = result.latency
                entry.outcome, entry.detail = outcome(result.answer)
                step.answered.append(entry)


def ended(report: SessionReport) -> bool:
    """Whether the session is over: closed, or lost."""
    return report.session.state in (CLOSED, LOST)
