"""Turn a replay (or two traces) into a report: data first (`Report`), then text or JSON.

Each recorded call ends in one status:

    identical   the live answer equals the recorded one after normalisation (or the
                call failed as it did when recorded: the same HTTP status, no answer)
    changed     it differs (each `Difference` names a path, old → new); with
                `fail_on_latency`, a call that much slower changes at the path `latency`
    missing     the recording has an answer, the live target gave none in time
    extra       the live target answered a request the recording has no answer to
    failed      no usable answer: an HTTP error, a cut stream, a dead process
    skipped     not sent: the replay's protocol era has no such request
    unanswered  neither side has an answer

Latency is reported beside every call: one slower than `latency` says (factor and slack) is
flagged (`CallResult.slower`, the factor), and fails the replay only with `fail_on_latency`.
The first call of a cold target (a stdio process just started, the replay's first call) is
marked `cold` and not judged on latency.

Exit status (`Report.exit_code`): 0 nothing changed, 1 something changed
(changed, missing, extra or failed), 3 the target broke the replay off (could not
be reached, died, is not MCP); a replay that could not start keeps the status of
its error (`abort_status`, 2 for unusable input).
"""

import difflib
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from mcpbench.protocol.errors import EXIT_ENVIRONMENT
from mcpbench.protocol.versions import LISTEN, as_offered, eras_differ
from mcpbench.replay.compare import Difference, IgnoreRules, compare, generalise, slower
from mcpbench.replay.engine import ReplayRun, SessionRun
from mcpbench.replay.operations import listen_views
from mcpbench.replay.plan import RecordedCall, SessionPlan, TracePlan, answer_obj
from mcpbench.trace.redact import Redactor

# The narrowest call-label column; a longer label widens the column for the whole report.
LABEL_WIDTH = 36

STATUSES = ("identical", "changed", "missing", "extra", "failed", "skipped", "unanswered")
COUNTED = ("identical", "changed", "missing", "extra", "failed")
CHANGES = ("changed", "missing", "extra", "failed")

# Latency change defaults: live slower than FACTOR x recorded AND by more than
# SLACK seconds is reported. The slack keeps scheduler noise on a busy machine
# (tens of ms) from reading as a change; the factor keeps long calls honest.
LATENCY_FACTOR = 3.0
LATENCY_SLACK = 0.25



@dataclass(frozen=True, slots=True)
class Judging:
    """How every call of a replay or a diff is judged: one value, handed down whole.

    `rules`: the ignore rules; `latency`: (factor, slack in seconds) beyond which a call is
    reported slower, None: latency is not reported; `fail_on_latency`: the factor beyond which
    slower is a change (None: reported, not judged).
    """

    rules: IgnoreRules = field(default_factory=IgnoreRules)
    latency: tuple[float, float] | None = (LATENCY_FACTOR, LATENCY_SLACK)
    fail_on_latency: float | None = None

    @classmethod
    def of(cls, rules: IgnoreRules, factor: float | None = None, slack_ms: float | None = None,
           fail_on: float | None = None) -> "Judging":
        """From the options as given: a factor of 0 turns latency off; what fails is reported too."""
        factor = LATENCY_FACTOR if factor is None else factor
        if fail_on is not None and (factor <= 0 or factor > fail_on):
            factor = fail_on
        slack = LATENCY_SLACK if slack_ms is None else slack_ms / 1000
        return cls(rules, None if factor <= 0 else (factor, slack), fail_on)

    def with_rules(self, rules: IgnoreRules) -> "Judging":
        return replace(self, rules=rules)


# Beyond this many calls in a session, the text report lists only the calls
# that did not come out identical (the JSON report always has every call).
LIST_ALL_UP_TO = 60

# How much of a value a text report shows.
VALUE_CHARS = 90


@dataclass(slots=True)
class CallResult:
    session: str
    index: int
    method: str
    name: str | None
    status: str
    changes: list[Difference] = field(default_factory=list)
    latency_old: float | None = None  # seconds
    latency_new: float | None = None
    detail: str | None = None
    slower: float | None = None  # live / recorded latency, when that is a latency change (reported)
    cold: bool = False  # the first call of a cold target: its latency includes the start

    @property
    def label(self) -> str:
        return f"{self.method} {self.name}" if self.name else self.method

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "index": self.index,
            "method": self.method,
            "name": self.name,
            "status": self.status,
            "changes": [change.to_json() for change in self.changes],
            "latency_ms": _ms(self.latency_new),
            "recorded_latency_ms": _ms(self.latency_old),
            "slower": None if self.slower is None else round(self.slower, 2),
            "cold": self.cold,
            "detail": self.detail,
        }


@dataclass(slots=True)
class SessionResult:
    id: str
    live_session: str | None
    calls: list[CallResult]
    notes: list[str] = field(default_factory=list)
    aborted: str | None = None

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for call in self.calls:
            out[call.status] += 1
        return out


@dataclass(slots=True)
class Report:
    kind: str  # "replay" or "diff"
    source: str  # the recorded trace (A)
    target: str  # the live target, or trace B
    sessions: list[SessionResult]
    rules: list[str] = field(default_factory=list)
    aborted: str | None = None
    elapsed: float = 0.0
    notes: list[str] = field(default_factory=list)
    abort_status: int = EXIT_ENVIRONMENT  # the exit status when `aborted`

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for session in self.sessions:
            for key, value in session.counts().items():
                out[key] += value
        return out

    @property
    def changed(self) -> bool:
        counts = self.counts()
        return any(counts[key] for key in CHANGES)

    @property
    def exit_code(self) -> int:
        if self.aborted:
            return self.abort_status
        return 1 if self.changed else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "trace": self.source,
            "target": self.target,
            "exit_code": self.exit_code,
            "aborted": self.aborted,
            "elapsed_s": round(self.elapsed, 6),
            "counts": self.counts(),
            "rules": self.rules,
            "notes": self.notes,
            "sessions": [
                {
                    "id": session.id,
                    "live_session": session.live_session,
                    "aborted": session.aborted,
                    "counts": session.counts(),
                    "notes": session.notes,
                    "calls": [call.to_json() for call in session.calls],
                }
                for session in self.sessions
            ],
        }

    def write_json(self, path: str) -> None:
        from pathlib import Path

        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(out, self.to_json())


def write_json(path: Any, body: Any) -> None:
    """A report's JSON, indented, written whole; secrets redacted (a target URL, an error or a live
    answer may quote one)."""
    from mcpbench.files.outputs import write_atomic

    data = orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str) + b"\n"
    write_atomic(path, Redactor().raw(data))


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def compared(answer: Any, notifications: list[dict]) -> dict | None:
    """The object compared for one call: the answer, plus its notifications when there are any."""
    obj = answer_obj(answer)
    if obj is not None and notifications:
        obj = {**obj, "notifications": notifications}
    return obj


def _judge(
    session: str,
    call: RecordedCall,
    old: dict | None,
    new: dict | None,
    judging: Judging,
    *,
    latency_old: float | None,
    latency_new: float | None,
    failure: str | None = None,
    skipped: str | None = None,
    cold: bool = False,
    status: int | None = None,
) -> CallResult:
    result = CallResult(session, call.index, call.method, call.name, "identical",
                        latency_old=latency_old, latency_new=latency_new, cold=cold)
    if skipped:
        result.status, result.detail = "skipped", skipped
        return result
    if old is None and new is None and failure and call.status is not None and status == call.status:
        result.detail = f"failed as recorded: HTTP {status}, no answer"
        return result
    if old is not None and new is None:
        result.status = "failed" if failure else "missing"
        result.detail = failure or "no answer in time"
        return result
    if old is None and new is None:
        result.status = "failed" if failure else "unanswered"
        result.detail = failure
        return result
    if old is None:
        result.status = "extra"
        result.detail = "the recording has no answer to this request"
        return result
    result.changes = compare(old, new, judging.rules, method=call.method, name=call.name)
    latency, fail_on_latency = judging.latency, judging.fail_on_latency
    if latency is not None and not cold and slower(latency_old, latency_new, factor=latency[0], slack=latency[1]):
        result.slower = latency_new / latency_old if latency_old else None
        if fail_on_latency is not None and slower(latency_old, latency_new, factor=fail_on_latency, slack=latency[1]):
            result.changes.append(Difference("latency", "changed", _ms(latency_old), _ms(latency_new)))
    if result.changes:
        result.status = "changed"
    return result


def build(run: ReplayRun, judging: Judging, *, stdio_target: bool = False, redactor: Redactor | None = None) -> Report:
    """Compare every call of a replay with its recording, as `judging` says.

    The first call of a cold target is not judged on latency: the replay's first call, and with `stdio_target` each session's first (its process
    starts with it). `redactor`: the recording's redaction rules, applied to live answers before
    they are compared (equal secrets then compare equal, and no live secret reaches the report).
    """
    report = Report("replay", run.trace.path, run.target, [], [str(r) for r in judging.rules.rules], run.aborted, run.elapsed)
    if run.trace.torn:
        report.notes.append(run.trace.torn)
    report.notes += run.notes
    if run.bridged:
        report.notes.append(
            f"{len(run.bridged)} session(s) recorded without a handshake (sessionless HTTP: {', '.join(run.bridged[:3])}"
            f"{', …' if len(run.bridged) > 3 else ''}) got one made for the target, which keeps sessions: "
            "initialize and notifications/initialized before their calls")
    for index, session in enumerate(run.sessions):
        cold = stdio_target or index == 0
        report.sessions.append(_session_result(session, judging, cold, run.asked, redactor))
    header = run.trace.header if isinstance(run.trace.header, dict) else {}
    if isinstance(header.get("fuzz"), dict) and not run.aborted:
        resident = next((session.resident for session in run.sessions if len(session.resident) == 2), None)
        report.notes.append(fuzz_note(header["fuzz"], [call for session in report.sessions for call in session.calls], resident))
    return report


# How a fuzz finding's call comes out when the finding reproduces (`mcpbench fuzz` writes the trace,
# its header naming the class): no answer again, two answers that differ again, or the same answer.
REPRODUCED = {"crash": ("unanswered", "failed", "missing"), "hang": ("unanswered", "failed", "missing"),
              "non-deterministic": ("changed",)}
# Classes a single replayed call cannot show: they are judged over a run (slow can, when the trace
# says the latency it was slow past: `slow_after_s`; memory can, when it says how much the server grew,
# `memory_grew_bytes`, and the replay started the stdio server: its resident memory is sampled).
NOT_REPLAYED = ("slow", "memory")
# A memory finding reproduces when a replay of its calls grows the server by at least this share of what the
# fuzz run saw (the same order: the replay's baseline is taken after the handshake, the fuzz run's after calls).
MEMORY_SHARE = 0.5


def fuzz_note(fuzz: dict, calls: list[CallResult], resident: list[int] | None = None) -> str:
    """Whether the fuzz finding a trace records reproduced: its call (the tool's last `tools/call`,
    or for a protocol case the ping after it) came out as the class says it must; for `memory`, the stdio
    server's resident memory (`resident`: after the first answer and after the last step) grew as much."""
    cls, tool = str(fuzz.get("class")), str(fuzz.get("tool"))
    found = f"fuzz finding {cls} in {tool}" + (f" ({fuzz['evidence']})" if fuzz.get("evidence") else "")
    mine = [call for call in calls if call.method == "tools/call" and call.name == tool] or calls[-1:]
    bound = fuzz.get("slow_after_s")
    grew = fuzz.get("memory_grew_bytes")
    if cls == "memory" and isinstance(grew, int) and resident:
        first, last = resident
        verdict = "reproduced" if last - first >= grew * MEMORY_SHARE else "NOT reproduced"
        return (f"{found}: {verdict}: resident memory went from {first / 2**20:.0f} MiB to {last / 2**20:.0f} MiB over "
                f"{len(mine)} calls (the fuzz run saw {grew / 2**20:.0f} MiB of growth)")
    if cls == "slow" and isinstance(bound, (int, float)) and mine and mine[-1].latency_new is not None:
        took = mine[-1].latency_new
        verdict = "reproduced" if took > bound else "NOT reproduced"
        return f"{found}: {verdict}: {mine[-1].label} took {took:.2f} s (slow past {bound:.2f} s)"
    if cls in NOT_REPLAYED:
        return f"{found}: a replay cannot show {cls} (judged over a run): mcpbench fuzz --tool {tool} again"
    if tool == "(protocol)":  # fuzz's name for a protocol case: its bytes are kept as a violation, never sent
        return f"{found}: a replay does not send a protocol case's bytes: mcpbench fuzz again, or send the trace's `raw` by hand"
    if not mine:
        return f"{found}: not reproduced: the trace has no call to send"
    call = mine[-1]
    if call.status in REPRODUCED.get(cls, ("identical",)):
        return f"{found}: reproduced: {call.label} came out {call.status}, as when it was found"
    return f"{found}: NOT reproduced: {call.label} came out {call.status} (the server behaves differently now)"


def _session_result(session: SessionRun, judging: Judging, cold: bool, asked: str | None,
                    redactor: Redactor | None = None) -> SessionResult:
    rules = judging.rules
    era_judging = judging.with_rules(rules.extend(()) if not session.era_switched else _with_era(rules))
    out = SessionResult(session.plan.id, session.live_session, [], list(session.plan.notes) + session.notes, session.aborted)
    first_sent = min((live.sent for live in session.calls if live.sent is not None), default=None)
    sent = {live.call.index: live.sent for live in session.calls if live.sent is not None}
    for live in session.calls:
        call = live.call
        if call.method == LISTEN and live.sent is not None and call.server:
            # A listen stream: the changes it told, each under the request that caused it (operations.py).
            old, new = listen_views(session.plan, call, list(zip(live.arrived, live.notifications)), sent)
        else:
            new = compared(live.answer, live.notifications)
            old = compared(call.answer, call.notifications)
        if redactor is not None and new is not None:
            new = redactor.json(new)[0]
        if asked is not None and old is not None and "result" in old and call.method == "initialize" and not session.era_switched:
            old = {**old, "result": as_offered(old["result"], asked)}  # the version asked for is expected
        out.calls.append(
            _judge(
                session.plan.id, call, old, new, era_judging, latency_old=call.latency, latency_new=live.latency,
                failure=live.failure or ("no answer within the timeout" if live.timed_out else None),
                skipped=live.skipped, cold=cold and live.sent is not None and live.sent == first_sent, status=live.status,
            )
        )
        result = out.calls[-1]
        if live.changes:  # what the replay named itself (an input key the recording never answered, a task's end)
            result.changes += live.changes
            result.status = "changed" if result.status == "identical" else result.status
        result.detail = result.detail or live.note
    if session.unrecorded_asks:
        out.notes.append("the server asked what the recording cannot answer: " + ", ".join(session.unrecorded_asks))
    return out


def _with_era(rules: IgnoreRules) -> IgnoreRules:
    from mcpbench.replay.compare import ERA_RULES

    return rules.extend(ERA_RULES)


def learn_noise(first: ReplayRun, second: ReplayRun, rules: IgnoreRules) -> list[str]:
    """Rules for every path whose value differed between two replays of the same trace."""
    learned: set[str] = set()
    for a, b in zip(first.sessions, second.sessions):
        for x, y in zip(a.calls, b.calls):
            old, new = compared(x.answer, x.notifications), compared(y.answer, y.notifications)
            if old is None or new is None:
                continue
            call = x.call
            scope = call.method + (f"@{call.name}" if call.name else "")
            for change in compare(old, new, rules, method=call.method, name=call.name):
                learned.add(f"{scope}:{generalise(change.path)}")
    return sorted(learned)


# ---- diff of two traces -----------------------------------------------------------------------


def diff_traces(a: TracePlan, b: TracePlan, judging: Judging) -> Report:
    """Compare two traces call by call: sessions paired in order, calls aligned by method and name."""
    report = Report("diff", a.path, b.path, [], [str(r) for r in judging.rules.rules])
    for note in (a.torn, b.torn):
        if note:
            report.notes.append(note)
    for index in range(max(len(a.sessions), len(b.sessions))):
        sa = a.sessions[index] if index < len(a.sessions) else None
        sb = b.sessions[index] if index < len(b.sessions) else None
        report.sessions.append(_diff_session(sa, sb, judging))
    return report


def _diff_session(a: SessionPlan | None, b: SessionPlan | None, judging: Judging) -> SessionResult:
    calls_a = a.calls if a else []
    calls_b = b.calls if b else []
    out = SessionResult(a.id if a else f"(only in B) {b.id}", b.id if b else None, [])
    if a and b and eras_differ(a.version, b.version):
        judging = judging.with_rules(_with_era(judging.rules))
    rules = judging.rules
    keys_a = [(c.method, c.name) for c in calls_a]
    keys_b = [(c.method, c.name) for c in calls_b]
    matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    sid = out.id
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for ca, cb in zip(calls_a[i1:i2], calls_b[j1:j2]):
                result = _judge(
                    sid, ca, compared(ca.answer, ca.notifications), compared(cb.answer, cb.notifications), judging,
                    latency_old=ca.latency, latency_new=cb.latency,
                )
                params = compare(_params(ca), _params(cb), rules, method=ca.method, name=ca.name)
                if params:
                    result.changes = [Difference("params" + (("." + c.path) if c.path else ""), c.kind, c.old, c.new) for c in params] + result.changes
                    result.status = "changed" if result.status == "identical" else result.status
                out.calls.append(result)
            continue
        for ca in calls_a[i1:i2]:
            out.calls.append(CallResult(sid, ca.index, ca.method, ca.name, "missing", latency_old=ca.latency,
                                        detail="not in trace B"))
        for cb in calls_b[j1:j2]:
            out.calls.append(CallResult(sid, cb.index, cb.method, cb.name, "extra", latency_new=cb.latency,
                                        detail="not in trace A"))
    return out


def _params(call: RecordedCall) -> dict:
    params = call.request.params or {}
    return {k: v for k, v in params.items() if k != "_meta"}


# ---- text -----------------------------------------------------------------------------------------


def _value(value: Any) -> str:
    if value is None:
        return "∅"
    text = orjson.dumps(value, default=str).decode() if not isinstance(value, str) else orjson.dumps(value).decode()
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def _fmt_ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.1f} ms"


def _counts_text(counts: dict[str, int]) -> str:
    text = ", ".join(f"{counts[key]} {key}" for key in COUNTED)
    extras = [f"{counts[key]} {key}" for key in ("skipped", "unanswered") if counts[key]]
    return text + (f" ({', '.join(extras)})" if extras else "")


def render(report: Report, *, verbose: bool = False) -> str:
    """The human summary: per session its counts, then each call with its latency and changes."""
    lines = []
    counts = report.counts()
    calls = sum(counts.values())
    verb = "replay of" if report.kind == "replay" else "diff"
    arrow = "→" if report.kind == "replay" else "vs"
    lines.append(f"mcpbench {verb} {report.source} {arrow} {report.target}: "
                 f"{len(report.sessions)} session(s), {calls} call(s)" + (f" in {report.elapsed:.2f} s" if report.elapsed else ""))
    replay = report.kind == "replay"
    # A diff has no live side: trace B's session and latencies are named as B's.
    other, before = ("live session", "recorded") if replay else ("B", "A")
    width = max([LABEL_WIDTH] + [len(call.label) for session in report.sessions for call in session.calls])
    for session in report.sessions:
        live = f" ({other} {session.live_session})" if session.live_session and session.live_session != session.id else ""
        lines.append(f"session {session.id}{live}: {_counts_text(session.counts())}")
        show_all = verbose or len(session.calls) <= LIST_ALL_UP_TO
        for call in session.calls:
            if not show_all and call.status == "identical" and call.slower is None:
                continue
            latency = f"{_fmt_ms(call.latency_new)} ({before} {_fmt_ms(call.latency_old)})"
            if call.cold:
                latency += " cold start"
            elif call.slower is not None:
                latency += f" slower ×{call.slower:.1f}"
            lines.append(f"  #{call.index:<4} {call.label:<{width}} {call.status:<10} {latency}")
            lines += [f"         {line}" for line in change_lines(call)]
        if not show_all:
            live_ms = [c.latency_new for c in session.calls if c.latency_new is not None]
            old_ms = [c.latency_old for c in session.calls if c.latency_old is not None]
            if live_ms and old_ms:
                lines.append(f"  latency p50 {_fmt_ms(statistics.median(live_ms))} ({before} {_fmt_ms(statistics.median(old_ms))})")
        for note in session.notes:
            lines.append(f"  note: {note}")
        if session.aborted:
            lines.append(f"  aborted: {session.aborted}")
    for note in report.notes:
        lines.append(f"note: {note}")
    lines.append(f"calls: {_counts_text(counts)}")
    if report.aborted:
        lines.append(f"the {'replay' if replay else 'diff'} could not run to its end: {report.aborted}")
    return Redactor().text("\n".join(lines))  # a target URL, an error or a live answer may quote a secret


def change_lines(call: CallResult) -> list[str]:
    """What came out differently for one call, a line each: why it failed, then each path, old → new."""
    lines = [call.detail] if call.detail and call.status != "changed" else []  # a failure as recorded says so
    return lines + [f"{change.path or '(whole answer)'}: {_value(change.old)} → {_value(change.new)}" for change in call.changes]


def changed(report: Report) -> list[CallResult]:
    """The calls that count as a change (changed, missing, extra, failed), in report order."""
    return [call for session in report.sessions for call in session.calls if call.status in CHANGES]


def render_changes(report: Report, *, limit: int = LIST_ALL_UP_TO) -> str:
    """Only what changed: a headline, then each changed call (at most `limit`) with its paths, old → new."""
    calls = changed(report)
    counts = report.counts()
    verb, arrow = ("replay of", "→") if report.kind == "replay" else ("diff", "vs")
    lines = [f"mcpbench {verb} {report.source} {arrow} {report.target}: {len(calls)} of {sum(counts[k] for k in COUNTED)} "
             f"call(s) changed ({_counts_text(counts)})"]
    for call in calls[:limit]:
        lines.append(f"  session {call.session} #{call.index} {call.label}: {call.status}")
        lines += [f"    {line}" for line in change_lines(call)]
    if len(calls) > limit:
        lines.append(f"  … and {len(calls) - limit} more")
    if report.aborted:
        lines.append(f"  aborted: {report.aborted}")
    return Redactor().text("\n".join(lines))


__all__ = ["CallResult", "Report", "SessionResult", "build", "change_lines", "changed", "diff_traces", "learn_noise",
           "render", "render_changes"]
