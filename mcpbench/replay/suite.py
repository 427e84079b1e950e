"""Suites of traces: what `replay DIR_OR_GLOB...` names, and one trace's replay as every caller runs it.

`expand` turns files, folders and glob patterns into trace paths (a folder: every trace under it,
recursively; a pattern the shell left unexpanded: matched here, `**` included), in a stable order.
`replay_one` replays one recorded trace against a target and builds its report, learning noise
first when asked: `mcpbench replay` (one trace or a suite) and the pytest plugin's `mcp_replay`
both run it.
"""

import contextlib
import glob
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mcpbench.auth.options import ClientAccess
from mcpbench.companions.options import TelemetryOptions
from mcpbench.companions.telemetry import Companion
from mcpbench.protocol.errors import ReplayError
from mcpbench.protocol.transports import STDIO
from mcpbench.replay.compare import IgnoreRules, load_rules, save_rules
from mcpbench.replay.contract import ContractReport, ContractResult, replay_contract, surface_plan
from mcpbench.replay.engine import FOREIGN_HOST_RECORDED, Pace, Replayer, ReplayRun
from mcpbench.replay.plan import TracePlan
from mcpbench.replay.report import Judging, Report, build, learn_noise, write_json
from mcpbench.system.target import Target
from mcpbench.trace.redact import Redactor
from mcpbench.trace.writer import TraceWriter

# What a trace file's name ends with (a folder's other files, noise rules say, are not traces).
TRACE_ENDINGS = (".jsonl", ".jsonl.gz", ".jsonl.zst")
GLOB_CHARS = frozenset("*?[")


def expand(patterns: Sequence[str]) -> list[Path]:
    """The trace files `patterns` name: files as given, folders searched, globs matched; each once.

    Raises:
        ReplayError: a pattern or folder that names no trace, or a path that does not exist (exit 2).
    """
    found: list[Path] = []
    for pattern in patterns:
        path = Path(pattern)
        if path.is_dir():
            # A hidden file is not a trace of its own: a tee's pending part (`.F.<id>.part.jsonl`) joins F.
            matches = sorted(
                p for p in path.rglob("*") if p.name.endswith(TRACE_ENDINGS) and not p.name.startswith(".") and p.is_file()
            )
            if not matches:
                raise ReplayError(f"{pattern}: a folder with no trace in it (*.jsonl, *.jsonl.gz, *.jsonl.zst)")
        elif path.is_file() or not GLOB_CHARS.intersection(pattern):
            matches = [path]  # a missing file is said by the reader, naming it
        else:
            matches = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
            if not matches:
                raise ReplayError(f"{pattern}: matches no trace")
        found += [match for match in matches if match not in found]
    return found


def rules_beside(trace: str | os.PathLike) -> list[str]:
    """The ignore rules kept beside a trace: learned noise (`TRACE.noise.json`) and hand-written (`TRACE.ignore`)."""
    rules: list[str] = []
    for path in (noise_path(trace), Path(trace).with_suffix(".ignore")):
        if path.is_file():
            rules += load_rules(path)
    return rules


def noise_path(trace: str | os.PathLike) -> Path:
    """Where `--learn-noise` keeps what it learned: beside the trace, `.noise.json` for its last suffix."""
    return Path(trace).with_suffix(".noise.json")


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How each trace of a run is replayed (how it is judged: `report.Judging`)."""

    protocol_version: str | None = None
    pace: Pace = Pace()
    timeout: float | None = None  # None: per call, from the recording (`Replayer.timeout_for`)
    redact: tuple[str, ...] = ()
    telemetry: TelemetryOptions = TelemetryOptions()  # the calls as spans, sent as they go (`--otlp`)
    access: ClientAccess | None = None  # an HTTP target's headers, tokens and proxies (`mcpbench.auth`)
    foreign_host: str = FOREIGN_HOST_RECORDED  # a rebinding check's recorded Host, or the target's (`Replayer`)


@dataclass(slots=True)
class ReplayOutcome:
    """One trace's replay: its report, its run, and why its own trace is incomplete (if it is)."""

    report: Report
    run: ReplayRun | None
    learned: list[str] | None = None  # the noise rules learned, when asked to learn
    recording_failed: str | None = None
    wrote: bool = False  # the replay's own trace was written (`out`) to its end


@dataclass(slots=True)
class SuiteResult:
    """The replays of a suite's traces, one report each, and the one verdict over them.

    Exit status: the worst broken-off replay's (`Report.abort_status`), else 1 when a trace changed, else 0.
    """

    reports: list[Report] = field(default_factory=list)

    @property
    def aborted(self) -> list[Report]:
        return [report for report in self.reports if report.aborted]

    @property
    def changed(self) -> list[Report]:
        return [report for report in self.reports if report.changed and not report.aborted]

    @property
    def exit_code(self) -> int:
        return max((report.abort_status for report in self.aborted), default=1 if self.changed else 0)

    def summary(self) -> str:
        """One line: how many traces came out unchanged, changed and broken off."""
        changed, aborted = len(self.changed), len(self.aborted)
        return (f"{len(self.reports)} trace(s): {len(self.reports) - changed - aborted} unchanged, "
                f"{changed} changed, {aborted} broken off")

    def to_json(self) -> dict:
        return {"kind": "replay-suite", "exit_code": self.exit_code, "traces": [report.to_json() for report in self.reports]}

    def write_json(self, path: str | os.PathLike) -> None:
        write_json(path, self.to_json())


def replay_contracts(recorded: Sequence[TracePlan], target: Target, options: ReplayOptions, fail_on: str, *,
                     each: Callable[[ContractReport], None] = lambda report: None) -> ContractResult:
    """Each trace's declared surface against the live server's (only the handshake and the listings
    are sent), judged as `fail_on` says; `each` hears every report as it is made. An interrupted
    replay ends the suite there."""
    reports = []
    for plan in recorded:
        run = Replayer(target, protocol_version=options.protocol_version, pace=options.pace,
                       timeout=options.timeout, access=options.access).run(surface_plan(plan))
        reports.append(replay_contract(plan, run))
        each(reports[-1])
        if run.interrupted:
            break
    return ContractResult(reports, fail_on)


def replay_one(recorded: TracePlan, target: Target, judging: Judging, options: ReplayOptions, *,
               learn_to: Path | None = None, out: str | os.PathLike | None = None) -> ReplayOutcome:
    """Replay `recorded` against `target` and judge every call as `judging` says.

    With `learn_to`, replay twice first and save the paths that differed between the two runs
    there as ignore rules (they also apply to this comparison). With `out`, write the replay's own
    trace there.
    """
    def run_once(writer: TraceWriter | None = None) -> ReplayRun:
        return Replayer(target, protocol_version=options.protocol_version, pace=options.pace, timeout=options.timeout,
                        writer=writer, access=options.access, foreign_host=options.foreign_host).run(recorded)

    def judged(run: ReplayRun, judging: Judging) -> Report:
        return build(run, judging, stdio_target=target.transport == STDIO, redactor=redactor if options.redact else None)

    redactor = Redactor(options.redact)
    first = run_once() if learn_to is not None else None
    if first is not None and first.aborted:
        return ReplayOutcome(judged(first, judging), first)
    with contextlib.ExitStack() as stack:
        # --otlp: the replay's own trace (a temporary one without `out`), followed by the companion
        path = out or (Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mcpbench-replay-"))) / "replay.jsonl"
                       if options.telemetry.any else None)
        companion = Companion.check(options.telemetry, path) if path else None
        writer = TraceWriter(path, transport=target.transport, redactor=redactor,
                             header={"replay_of": recorded.path, "target": redactor.url(str(target)),
                                     "protocol_version": options.protocol_version}) if path else None
        if companion is not None:
            stack.callback(companion.stop)
            companion.start()
        try:
            run = run_once(writer)
        finally:
            if writer:
                writer.close()
    if not out:
        writer = None  # a temporary trace, gone: nothing to say about it
    learned = None
    if first is not None and not run.aborted:
        learned = learn_noise(first, run, judging.rules)
        save_rules(learn_to, learned, source=recorded.path)
        judging = judging.with_rules(judging.rules.extend(learned))
    failed = writer.failed if writer else None
    return ReplayOutcome(judged(run, judging), run, learned, failed, wrote=writer is not None and not failed)


def rules_for(trace: str | os.PathLike, ignore: Iterable[str], *, defaults: bool = True, beside: bool = True) -> IgnoreRules:
    """The rules one trace is compared under: `ignore`, plus (with `beside`) those kept beside it."""
    return IgnoreRules([*ignore, *(rules_beside(trace) if beside else ())], defaults=defaults)
