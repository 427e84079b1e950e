"""The fuzzing loop: discover the tools, run each one's cases under Hypothesis, judge every answer.

Each tool gets a Hypothesis test of its own (`@given(cases(...))`, seeded from the run's seed and the
tool's name): its body sends the case and raises the finding's class when the answer is one, so
Hypothesis shrinks every class it finds on a tool to a small case. The findings are kept on the
side as they come (the smallest case of each class and tool), so a budget spent, a shrink cut
short or Ctrl-C keeps what was found. Bounds: `budget` seconds and `cases` calls in all, a share of
each per era and tool; `rate` calls a second at most.

Each era asked for (`FuzzSettings.versions`: the handshake era's latest version, 2026-07-28, or both one
after the other) is a run of its own over the same bounds' share: its sessions speak that version
(the client core's `initialize`, or its `_meta` envelope on every request), its protocol cases are
that era's, and its findings say the version. In 2026-07-28, a tool that answers `input_required`
with a `requestState` is sent the retry once with that state altered (`protocol_cases.tampered`).
"""

import os
import tempfile
import time
import zlib
from urllib.parse import urlsplit
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from mcpbench.auth.options import ClientAccess
from mcpbench.fuzz.cases import VALID, CallCase, cases, dumps
from mcpbench.fuzz.findings import Finding
from mcpbench.fuzz.judge import (
    CRASH, HANG, PROTOCOL, SLOW, SLOW_FACTOR, SLOW_MAX_BYTES, differs, invalid_schema, judge, memory_grew, repeatable, slow_bound,
    state_accepted,
)
from mcpbench.fuzz.protocol_cases import PROTOCOL_TOOL, ProtocolCase, expected_refusal, protocol_cases, tampered, with_changes
from mcpbench.fuzz.session import FuzzSession, Live, RequestOutcome
from mcpbench.protocol.errors import EXIT_FAILED, EXIT_OK, TargetError
from mcpbench.protocol.transports import STDIO
from mcpbench.protocol.versions import INPUT_REQUESTS, INPUT_RESPONSES, LATEST_HANDSHAKE, REQUEST_STATE, asks_for_input, has_handshake, has_method
from mcpbench.system.target import Target

# How long the handshake may take (a stdio server importing its SDK on a busy machine included).
OPEN_TIMEOUT = 30.0
# How long a call may go without an answer or a sign of life (a progress notification for its token, then a
# ping answered on its connection) before it is a hang.
DEFAULT_HANG_AFTER = 10.0
# How long a call still showing life is waited for: a client in the field gives up there too (the TypeScript
# SDK's default request timeout is 60 s). A tool asked for a long task (the reference server's `slow` sleeps
# up to 30 s, as asked) is not hung; one that shows life and never answers is, at this bound.
DEFAULT_LIVE_LIMIT = 60.0
# At most this many calls alive past a silence are left to finish in the background (each holds a session,
# a stdio process) while the run goes on; they are waited for at its end. Past that, one is waited for in place.
MAX_PARKED = 3
# Of each finding, shrinking may spend at most this many calls: a crashing stdio server costs a
# restart per call, and a small case found soon beats the smallest found late.
SHRINK_CALLS = 10
# A stdio server's memory baseline is taken after this many calls (its caches warmed).
MEMORY_BASELINE_CALLS = 2
# A memory finding's trace holds at most this many calls (those that grew the process, for a replay to grow it again).
MEMORY_TRACE_CALLS = 200
# How long an HTTP protocol case's POST may take to get its status before the ping goes (it ends at the
# status: an 8 MiB body on a busy machine takes more than the few milliseconds most take).
PROTOCOL_WAIT = 2.0
# Calls per tool when only a time budget bounds the run.
UNBOUNDED_CASES = 100_000
# The tools/call answers to a tampered retry's input requests, by the kind of request (SEP-2322's three):
# an elicitation declined, no roots, a sampling answered with a fixed text (what they say is not the point).
INPUT_ANSWERS = {"elicitation/create": {"action": "decline"}, "roots/list": {"roots": []},
                 "sampling/createMessage": {"role": "assistant", "content": {"type": "text", "text": "mcpbench fuzz"},
                                            "model": "mcpbench-fuzz"}}
# The case kind of a tampered requestState retry, and of a tool listing whose schema is not JSON Schema.
TAMPERED_STATE = "tampered-request-state"
INVALID_SCHEMA = "invalid-schema"


class _Stop(BaseException):
    """Ends one tool's Hypothesis test (its share spent): a BaseException, so Hypothesis lets it through."""


class _Finding(Exception):
    """Raised in a tool's test when an answer is a finding: one subclass per class, so Hypothesis tells them apart."""


_FOUND: dict[str, type[_Finding]] = {}


def _found(cls: str) -> type[_Finding]:
    if cls not in _FOUND:
        _FOUND[cls] = type(f"Found_{cls.replace('-', '_')}", (_Finding,), {})
    return _FOUND[cls]


@dataclass
class ToolInfo:
    name: str
    input_schema: dict | None
    output_schema: dict | None
    annotations: dict

    @classmethod
    def from_listing(cls, tool: dict) -> "ToolInfo":
        return cls(str(tool.get("name")), tool.get("inputSchema") if isinstance(tool.get("inputSchema"), dict) else None,
                   tool.get("outputSchema") if isinstance(tool.get("outputSchema"), dict) else None,
                   tool.get("annotations") if isinstance(tool.get("annotations"), dict) else {})


@dataclass
class FuzzSettings:
    seed: int
    budget: float | None = None  # seconds
    cases: int | None = None  # calls
    hang_after: float = DEFAULT_HANG_AFTER
    live_limit: float = DEFAULT_LIVE_LIMIT
    rate: float | None = None  # calls per second
    allow: tuple[str, ...] = ()
    read_only_only: bool = False
    only: tuple[str, ...] = ()  # fuzz only these tools
    skip: tuple[str, ...] = ()  # leave these tools out
    seeds: dict[str, list[Any]] = field(default_factory=dict)  # tool -> recorded arguments
    protocol: bool = True  # send the protocol cases (`protocol_cases.py`) too
    versions: tuple[str, ...] = (LATEST_HANDSHAKE,)  # the eras to fuzz in, one after the other


@dataclass
class FuzzRun:
    """What one run sent and found; its verdict (`exit_code`) and its JSON (`--json`)."""

    target: str
    seed: int
    versions: tuple[str, ...] = ()  # the versions fuzzed in, one after the other
    tools: list[ToolInfo] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # tool -> why it was not called
    findings: list[Finding] = field(default_factory=list)
    calls: int = 0  # tool calls (what --cases bounds)
    protocol_cases: int = 0  # protocol cases sent, each followed by a ping
    sent: list[tuple[str, CallCase]] = field(default_factory=list)  # every case with its version, in the order sent
    seconds: float = 0.0
    interrupted: bool = False
    ended: str | None = None  # why the run ended early (the server went away)
    notes: list[str] = field(default_factory=list)

    def digest(self) -> str:
        """A short hash of every case sent, in order: two runs with equal digests sent the same cases."""
        import hashlib

        text = b"\n".join(dumps([version, case.tool, case.kind, case.arguments])
                          for version, case in self.sent)
        return hashlib.sha256(text).hexdigest()[:16]

    @property
    def exit_code(self) -> int:
        """1 when the run found something, else 0."""
        return EXIT_FAILED if self.findings else EXIT_OK

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "seed": self.seed, "versions": list(self.versions), "calls": self.calls,
                "protocol_cases": self.protocol_cases, "seconds": self.seconds, "cases_digest": self.digest(),
                "interrupted": self.interrupted, "ended": self.ended, "tools": [tool.name for tool in self.tools],
                "skipped": self.skipped, "notes": self.notes, "findings": [f.to_json() for f in self.findings]}


def skip_reason(tool: ToolInfo, settings: FuzzSettings) -> str | None:
    """Why `tool` must not be called (None: it may be)."""
    if tool.name in settings.allow:
        return None
    if settings.only and tool.name not in settings.only:
        return "not named by --tool"
    if tool.name in settings.skip:
        return "named by --skip"
    if tool.annotations.get("destructiveHint") is True:
        return "annotated destructiveHint (name it with --allow to fuzz it)"
    if settings.read_only_only and tool.annotations.get("readOnlyHint") is not True:
        return "not annotated readOnlyHint (--read-only-only)"
    return None


def stdio_argv(argv: tuple[str, ...], here: str) -> tuple[str, ...]:
    """The server command with relative paths of files here made absolute: it runs in a folder of its own."""
    return tuple(os.path.abspath(os.path.join(here, part)) if not os.path.isabs(part) and os.path.isfile(os.path.join(here, part))
                 else part for part in argv)


class Fuzzer:
    """One run against `target`.

    Args:
        target: where to fuzz.
        settings: the bounds, safety and seeds.
        access: the user's headers, tokens and proxies.
        say: progress lines (stderr).
    """

    def __init__(self, target: Target, settings: FuzzSettings, *, access: ClientAccess | None = None,
                 say: Callable[[str], None] = lambda line: None) -> None:
        self.target = target
        self.settings = settings
        self.access = access
        self.say = say
        self.run = FuzzRun(str(target), settings.seed, settings.versions)
        self.session: FuzzSession | None = None
        self.folder: tempfile.TemporaryDirectory | None = None
        self.found: dict[tuple[str, str], Finding] = {}
        self.latencies: list[tuple[float, CallCase, RequestOutcome, list, str]] = []  # latency, case, outcome, handshake, version
        self._last_call = 0.0
        self._deadline = float("inf")
        self._tool_deadline = float("inf")
        self._tool_calls = 0
        self._cases = settings.cases  # the calls the era being fuzzed may reach
        self._shrinking: dict[tuple[str, str], int] = defaultdict(int)
        self._rss: list | None = None  # [session, baseline bytes, calls, tool, their logs] of the stdio process sampled
        self.version = settings.versions[0]  # the version the sessions of the era being fuzzed speak
        self._tampered: set[str] = set()  # tools sent a tampered requestState in this era
        self.parked: list[tuple[FuzzSession, ToolInfo, CallCase, RequestOutcome, str]] = []  # calls alive past a silence, left to finish

    # ---- sessions --------------------------------------------------------------------------------

    def _open(self, handshake: bool = True) -> FuzzSession:
        session = FuzzSession(self.target, access=self.access, cwd=self.folder.name if self.folder else None, version=self.version)
        try:
            session.open(OPEN_TIMEOUT, handshake)
        except BaseException:
            session.close()
            raise
        return session

    def _session(self) -> FuzzSession:
        if self.session is None or self.session.lost:
            if self.session is not None:
                self.session.close()
                self.session = None
            try:
                self.session = self._open()
            except TargetError as exc:
                self.run.ended = f"the server could not be reached again: {exc}"
                raise _Stop() from None
        return self.session

    # ---- the run -----------------------------------------------------------------------------------

    def execute(self) -> FuzzRun:
        started = time.monotonic()
        if self.settings.budget is not None:
            self._deadline = started + self.settings.budget
        if self.target.transport == STDIO:
            self.folder = tempfile.TemporaryDirectory(prefix="mcpbench-fuzz-")
            self.target = Target(STDIO, argv=stdio_argv(self.target.argv, os.getcwd()))
        try:
            versions = self.settings.versions
            for index, version in enumerate(versions):
                if self.run.ended or time.monotonic() >= self._deadline:
                    break
                self._era(version, len(versions) - index)
        except KeyboardInterrupt:
            self.run.interrupted = True
        finally:
            self._settle()
            self._judge_slow()
            self.run.findings = sorted(self.found.values(), key=lambda f: (f.case.tool, f.cls))
            self.run.seconds = time.monotonic() - started
            if self.session is not None:
                self.session.close()
            if self.folder is not None:
                self.folder.cleanup()
        return self.run

    def _era(self, version: str, eras_left: int) -> None:
        """Fuzz every tool in `version` with this era's share of the bounds (`eras_left`: this one and those after)."""
        if self.session is not None:
            self.session.close()
            self.session = None
        self.version, self._tampered, self._rss = version, set(), None
        deadline, cases = self._deadline, self.settings.cases
        now = time.monotonic()
        if deadline != float("inf"):
            self._deadline = now + (deadline - now) / eras_left
        if cases is not None:
            self._cases = self.run.calls + max(1, (cases - self.run.calls) // eras_left)
        try:
            self.session = self._open()
            tools = self._discover()
            first = not self.run.tools and not self.run.skipped
            fuzzed = []
            for tool in tools:
                why = skip_reason(tool, self.settings)
                if why is None:
                    fuzzed.append(tool)
                    if first:
                        self.run.tools.append(tool)
                elif first:
                    self.run.skipped[tool.name] = why
            self.say(f"mcpbench: fuzzing {len(fuzzed)} of {len(tools)} tools of {self.run.target} in {version} (seed {self.settings.seed})")
            if self.settings.protocol:
                self._protocol()
            for index, tool in enumerate(fuzzed):
                if self.run.ended or time.monotonic() >= self._deadline:
                    break
                self._fuzz_tool(tool, len(fuzzed) - index)
        finally:
            self._deadline = deadline

    def _discover(self) -> list[ToolInfo]:
        tools: list[ToolInfo] = []
        cursor = None
        for _ in range(100):  # pages: bounded, a server whose cursor never ends is not followed forever
            outcome = self.session.call("tools/list", {"cursor": cursor} if cursor else None, self.settings.hang_after)
            result = outcome.result
            if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
                why = outcome.detail or (f"JSON-RPC {outcome.answer.code} {outcome.answer.message}" if outcome.answer else "no answer")
                raise TargetError(f"{self.run.target}: tools/list failed: {why}")
            for tool in result["tools"]:
                if isinstance(tool, dict):
                    tools.append(ToolInfo.from_listing(tool))
                    if skip_reason(tools[-1], self.settings) is None:  # a tool left out is not looked at
                        self._check_schemas(tool, outcome)
            cursor = result.get("nextCursor")
            if not cursor:
                break
        return tools

    def _check_schemas(self, tool: dict, listing: RequestOutcome) -> None:
        """A tool whose inputSchema (or outputSchema) is not valid JSON Schema: a protocol finding about its listing."""
        name = str(tool.get("name"))
        for key in ("inputSchema", "outputSchema"):
            if key not in tool and key == "outputSchema":
                continue
            if (why := invalid_schema(tool.get(key))) is not None:
                case = CallCase(name, INVALID_SCHEMA, {key: tool.get(key)}, key)
                self._keep(Finding(PROTOCOL, case, f"tools/list: its {key} is not valid JSON Schema: {why}",
                                   self.session.handshake + listing.log, version=self.version))

    def _fuzz_tool(self, tool: ToolInfo, tools_left: int) -> None:
        from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings

        now = time.monotonic()
        self._tool_deadline = now + (self._deadline - now) / tools_left if self._deadline != float("inf") else float("inf")
        left = None if self.settings.cases is None else self._cases - self.run.calls
        share = UNBOUNDED_CASES if left is None else max(1, left // tools_left)
        self._tool_calls = 0
        self._share = share
        seeds = tuple(self.settings.seeds.get(tool.name, ()))
        try:
            for args in seeds[:share]:  # the recorded calls first, as they were (outside Hypothesis: a finding
                try:                    # among them must not end the tool's generation)
                    self._one(tool, CallCase(tool.name, VALID, args, seeded=True))
                except _Finding:
                    pass
            if self._tool_calls >= share:
                return

            @settings(database=None, deadline=None, max_examples=share - self._tool_calls, derandomize=False,
                      report_multiple_bugs=True, suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                      phases=(Phase.generate, Phase.shrink))
            @seed(zlib.crc32(f"{self.settings.seed}:{tool.name}".encode()))
            @given(cases(tool.name, tool.input_schema or {}, seeds))
            def check(case: CallCase) -> None:
                self._one(tool, case)

            check()
        except _Stop:
            pass
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - findings (kept already) or Hypothesis giving up on a flaky server
            if not isinstance(exc, (_Finding, ExceptionGroup)) and "Flaky" not in type(exc).__name__:
                self.run.notes.append(f"{tool.name}: {type(exc).__name__}: {exc}".splitlines()[0])

    def _alive(self, session: FuzzSession) -> RequestOutcome:
        """A request every server of the session's version answers at once: `ping` (2026-07-28 has none: `tools/list`)."""
        method = "ping" if has_method(self.version, "ping") else "tools/list"
        return session.call(method, None, self.settings.hang_after)

    def _protocol(self) -> None:
        """Each protocol case, then a ping: the server must survive it (a crash, a 5xx, a hang otherwise)."""
        for case in protocol_cases(self.target.transport, has_handshake(self.version)):
            if time.monotonic() >= self._deadline or self.run.ended:
                return
            self._pace()
            if case.fresh:
                self._before_handshake(case)
                continue
            try:
                session = self._session()
            except _Stop:
                return
            headers = refused = None
            if case.request is not None:  # built by the client core as it would send it, then its headers changed
                method, params, version = case.request
                out = session.conn.prepare(method, params, as_version=version)
                case = replace(case, payload=out.data)
                headers = with_changes(out.headers, case.headers)
                path = urlsplit(session.transport.url).path or "/mcp"
                initialize = session.handshake[0][1] if has_handshake(self.version) else None
                refused = expected_refusal(initialize, session.session_id, headers, case.payload, path)
            sent = session.send_raw(case.payload, PROTOCOL_WAIT, headers)
            ping = self._alive(session) if not sent.lost else sent
            self.run.protocol_cases += 1
            verdict = None
            if sent.lost or ping.lost:
                verdict = (CRASH, f"after it, {ping.detail or sent.detail or 'the session was lost'}")
            elif sent.status is not None and sent.status >= 500:
                verdict = (CRASH, f"answered HTTP {sent.status}")
            elif refused is not None and sent.status is not None and 200 <= sent.status < 300:
                verdict = (PROTOCOL, f"answered HTTP {sent.status} where the rules answer {refused.reply.status} ({refused.reason})")
            elif ping.timed_out:
                verdict = (HANG, f"after it, a ping got {ping.detail}")
                session.close()
                self.session = None
            if verdict is not None:
                shown = CallCase(PROTOCOL_TOOL, case.name, case.shown(), case.name)
                log = session.handshake + sent.log + (ping.log if ping is not sent else [])
                self._keep(Finding(verdict[0], shown, verdict[1], log, failure=verdict[1], version=self.version))

    def _before_handshake(self, case: ProtocolCase) -> None:
        """A call before the handshake (stdio, legacy SSE): a session of its own whose first message is the call;
        the core's rules take it as a call there, so only no answer (hang) or the carrier lost (crash) is a
        finding, and so is a handshake that fails after it."""
        method, params, _ = case.request
        try:
            session = self._open(handshake=False)
        except TargetError as exc:
            self.run.ended = f"the server could not be reached again: {exc}"
            return
        try:
            early = session.call(method, params, self.settings.hang_after)
            self.run.protocol_cases += 1
            verdict = None
            if early.lost:
                verdict = (CRASH, f"a {method} before initialize: {early.detail or 'the session was lost'}")
            elif early.timed_out:
                verdict = (HANG, f"a {method} before initialize got {early.detail}")
            else:
                try:
                    session.shake(self.settings.hang_after)
                except TargetError as exc:
                    verdict = (CRASH, f"after a {method} before initialize, {str(exc).split(': ', 1)[-1]}")
            if verdict is not None:
                shown = CallCase(PROTOCOL_TOOL, case.name, f"{method} before initialize", case.name)
                self._keep(Finding(verdict[0], shown, verdict[1], early.log + session.handshake,
                                   failure=verdict[1], version=self.version))
        finally:
            session.close()

    def _one(self, tool: ToolInfo, case: CallCase) -> None:
        """Send one case, judge it; raise its class when it is a finding (Hypothesis then shrinks it)."""
        if time.monotonic() >= min(self._deadline, self._tool_deadline) or self.run.ended:
            raise _Stop()
        if self._tool_calls >= self._share:  # shrinking: each finding's calls bounded
            known = [key for key in self.found if key[1] == tool.name]
            if not known or all(self._shrinking[key] >= SHRINK_CALLS for key in known):
                raise _Stop()
            for key in known:
                self._shrinking[key] += 1
        self._pace()
        session = self._session()
        live = Live(self.settings.hang_after, self.settings.live_limit, park=len(self.parked) < MAX_PARKED)
        outcome = session.call("tools/call", {"name": tool.name, "arguments": case.arguments}, self.settings.hang_after, live)
        self.run.calls += 1
        self._tool_calls += 1
        self.run.sent.append((self.version, case))
        if outcome.parked:  # alive past a silence: it goes on in its session, judged at the run's end (`_settle`)
            self.parked.append((session, tool, case, outcome, self.version))
            if session is self.session:
                self.session = None
            return
        self._memory(session, case, outcome)
        verdicts = judge(case, outcome, tool.input_schema, tool.output_schema)
        if not verdicts and tool.name not in self._tampered and asks_for_input(outcome.result) and REQUEST_STATE in outcome.result:
            self._tampered.add(tool.name)
            self._tamper(session, tool, case, outcome)
        if not verdicts and case.kind == VALID and outcome.answer is not None and repeatable(tool.annotations):
            again = session.call("tools/call", {"name": tool.name, "arguments": case.arguments}, self.settings.hang_after)
            self.run.calls += 1
            if (verdict := differs(outcome, again)) is not None:
                verdicts = [verdict]
                outcome.log += again.log
        self._latency(outcome, case, verdicts, session.handshake, self.version)
        if outcome.timed_out and session is self.session:  # the call may still be running: a fresh session for the next
            session.close()
            self.session = None
        if not verdicts:
            return
        first = verdicts[0]
        for verdict in verdicts:
            self._keep(Finding(verdict.cls, case, verdict.evidence, session.handshake + outcome.log,
                               failure=outcome.detail if verdict.cls in (CRASH, HANG) else None, version=self.version))
        raise _found(first.cls)(first.evidence)

    def _latency(self, outcome: RequestOutcome, case: CallCase, verdicts: list, handshake: list, version: str) -> None:
        """Keep an answered call's latency for `slow`, unless the call told it was long work: a progress notification
        is how MCP says so (a tool sleeping as long as it was asked, reporting progress, is not slow), or its answer
        was large (moving it takes its time)."""
        if outcome.latency is None or verdicts or (outcome.live is not None and outcome.live.progress):
            return
        if sum(len(raw) for way, raw, _ in outcome.log if way == "s2c") <= SLOW_MAX_BYTES:
            self.latencies.append((outcome.latency, case, outcome, handshake, version))

    def _settle(self) -> None:
        """Wait for the calls left alive past a silence (at most the live bound after each was sent), and judge them."""
        parked, self.parked = self.parked, []
        for session, tool, case, outcome, version in parked:
            try:
                if not self.run.interrupted:
                    session.settle(outcome)
                    verdicts = judge(case, outcome, tool.input_schema, tool.output_schema)
                    for verdict in verdicts:
                        self._keep(Finding(verdict.cls, case, verdict.evidence, session.handshake + outcome.log,
                                           failure=outcome.detail if verdict.cls in (CRASH, HANG) else None, version=version))
                    self._latency(outcome, case, verdicts, session.handshake, version)
            except KeyboardInterrupt:
                self.run.interrupted = True
            finally:
                session.close()

    def _tamper(self, session: FuzzSession, tool: ToolInfo, case: CallCase, first: RequestOutcome) -> None:
        """The retry of an `input_required` answer with its `requestState` altered (and the input asked for
        answered): a server taking it as done is a protocol finding; one that drops the session, a crash."""
        result = first.result
        asked = result.get(INPUT_REQUESTS) if isinstance(result.get(INPUT_REQUESTS), dict) else {}
        answers = {key: INPUT_ANSWERS.get(request.get("method"), {}) if isinstance(request, dict) else {} for key, request in asked.items()}
        state = tampered(result[REQUEST_STATE])
        params = {"name": tool.name, "arguments": case.arguments, REQUEST_STATE: state}
        if answers:
            params[INPUT_RESPONSES] = answers
        retry = session.call("tools/call", params, self.settings.hang_after)
        self.run.calls += 1
        verdict = judge(case, retry, None, None)[:1] or [state_accepted(retry, state)]
        if verdict[0] is not None:
            shown = CallCase(tool.name, TAMPERED_STATE, case.arguments, REQUEST_STATE)
            self._keep(Finding(verdict[0].cls, shown, verdict[0].evidence, session.handshake + first.log + retry.log,
                               failure=retry.detail if verdict[0].cls in (CRASH, HANG) else None, version=self.version))

    def _memory(self, session: FuzzSession, case: CallCase, outcome: RequestOutcome) -> None:
        """Sample a stdio server's resident memory after each call: the baseline after a tool's first calls, then
        each sample set against it (one process and one tool at a time: what one tool grew is not another's).
        A sample past the bound is taken again after a ping: memory the server still held for the answer it
        just wrote (the reference server's 16 MiB `big`: 72 MiB, 152 MiB after it, 72 MiB after a ping) is
        no growth; memory it keeps is. The finding's trace holds every call of the tool in that process (up to
        MEMORY_TRACE_CALLS), so that a replay, starting the server afresh, can grow it again."""
        rss = session.resident()
        if rss is None or outcome.lost:
            return
        if self._rss is None or self._rss[0] is not session or self._rss[3] != case.tool:
            self._rss = [session, None, 0, case.tool, []]
        self._rss[2] += 1
        if self._rss[2] <= MEMORY_TRACE_CALLS:
            self._rss[4] += outcome.log
        if self._rss[2] == MEMORY_BASELINE_CALLS:
            self._rss[1] = rss
        elif self._rss[1] is not None and memory_grew(self._rss[1], rss, self._rss[2] - MEMORY_BASELINE_CALLS):
            ping = self._alive(session)
            kept = session.resident() if ping.answer is not None else None
            if kept is not None and (verdict := memory_grew(self._rss[1], kept, self._rss[2] - MEMORY_BASELINE_CALLS)):
                self._keep(Finding(verdict.cls, case, f"{verdict.evidence}, still after a ping",
                                   session.handshake + self._rss[4] + ping.log, version=self.version, grew=kept - self._rss[1]))

    def _keep(self, finding: Finding) -> None:
        known = self.found.get(finding.key)
        if known is None or finding.size() < known.size():
            self.found[finding.key] = finding
        if known is None:  # said once kept: a Ctrl-C prompted by the line finds the finding there
            self.say(f"mcpbench: found {finding.cls} in {finding.case.tool}: {finding.evidence}")

    def _pace(self) -> None:
        if self.settings.rate:
            wait = self._last_call + 1.0 / self.settings.rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)  # the rate bound itself, not a synchronisation
        self._last_call = time.monotonic()

    def _judge_slow(self) -> None:
        for version in self.settings.versions:
            mine = [(latency, case, outcome, handshake) for latency, case, outcome, handshake, spoken in self.latencies if spoken == version]
            bound = slow_bound([latency for latency, _, _, _ in mine])
            if bound is None:
                continue
            for latency, case, outcome, handshake in mine:
                if latency > bound:
                    self._keep(Finding(SLOW, case, f"answered in {latency:.2f} s, past {bound:.2f} s (the run's median x{SLOW_FACTOR:g})",
                                       handshake + outcome.log, version=version, bound=bound))


__all__ = ["FuzzRun", "Fuzzer", "FuzzSettings", "ToolInfo", "skip_reason"]
