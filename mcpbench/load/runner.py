"""Run a scenario with Locust in its own processes, then check thresholds.

`run_scenario()` writes `<out>/scenario.json`, starts `python -m locust` (headless, `--csv`,
`--run-time`), bounds it in time, merges the raw samples, and returns a summary with the
threshold verdicts. Locust never loads in this process: it monkey-patches whatever imports it.

Alone, Locust runs the generic locustfile. With workers (a `Fleet`: `--master` for workers on
other machines, `--workers N` for N local ones, one code path) it runs a Locust master on the
run's own locustfile (runfile.py, which Locust ships to every worker), the workers stream their
samples to the master (roles.py), and the summary says what each worker sent and what arrived
(`samples_per_worker`, `samples_lost`, `workers_died`).

The pre-flight check (`preflight()`) runs one real session against the target
with the same client the users use (gevent without monkey-patching), so an
unreachable target or proxy, credentials the token endpoint refuses, or an
unknown tool fail with one line before any user spawns. A target that asks for
credentials it was not given is said in one line, naming its challenge, and the
run goes on: every call then fails as auth-required, as a threshold will say.

A result file that cannot be written (a full disk) does not stop the run: the Locust processes
report their sample file on a status pipe, the runner its own files, and the result says the
samples are incomplete (`RunResult.incomplete`, exit 3).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import orjson

from mcpbench import __version__
from mcpbench.auth.options import ClientAccess
from mcpbench.cliutil import stop_signals_noted
from mcpbench.load import samples as samples_mod
from mcpbench.load.runfile import RUNFILE_NAME, runfile_text
from mcpbench.load.scenario import Scenario, ScenarioError, Threshold
from mcpbench.load.sessions import SessionTally, count_sessions, read_samples
from mcpbench.load.transit import DRAIN_TIMEOUT, ROSTER_FILE
from mcpbench.load.worker import MASTER_PORT, last_line, start_worker
from mcpbench.system.listen import check_listen
from mcpbench.files.outputs import new_run_folder, write_atomic
from mcpbench.system.processes import dying_with_parent, ended, free_port, start, stop_process
from mcpbench.protocol.errors import EXIT_ENVIRONMENT, EnvironmentProblem, McpbenchError, TargetError
from mcpbench.protocol.http import AUTH_FAILURES
from mcpbench.system.target import Target, parse_target
from mcpbench.protocol.transports import STDIO
from mcpbench.trace.redact import Redactor

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
RESULTS_DIR = Path("results")
# Locust's startup (imports, gevent patching) and shutdown, on top of the run time: a run that
# takes this much longer than asked is stuck and gets killed.
RUN_MARGIN = 90.0
# Where Locust's web UI listens (`--ui`): loopback, on Locust's default port unless --web-port.
WEB_HOST, WEB_PORT = "127.0.0.1", 8089
# How long a Locust process gets to stop on SIGINT, on which it writes its CSVs (a master first
# drains its workers: DRAIN_TIMEOUT more), before it is killed.
LOCUST_STOP_GRACE = 10.0
# How long local workers get to quit once their master ended.
WORKERS_QUIT = 15.0
# How long a master waits for its workers (and a worker for its master), unless told otherwise.
JOIN_TIMEOUT = 60.0
# A pre-flight check gives up after this long (a stdio server may need seconds to import).
PREFLIGHT_TIMEOUT = 30.0
# Pages of tools/list followed when checking tool names.
MAX_TOOL_PAGES = 20


class LoadRunError(McpbenchError):
    """A load run could not be carried out (Locust failed to start, or never ended)."""


class LocustFailed(EnvironmentProblem):
    """The Locust process ended on its own, in error, before measuring anything (it could not import
    its locustfile, say): its exit status and the last line it wrote (exit 3, never a stop signal)."""


class WorkersMissing(EnvironmentProblem):
    """The master's workers did not all reach it in time."""


@dataclass(frozen=True)
class Fleet:
    """A run with a Locust master: where it listens, how many workers it waits for (and how long),
    and how many of them this command starts itself (`--workers N`)."""

    host: str = "127.0.0.1"
    port: int = MASTER_PORT  # 0: any free port (local workers only)
    expect: int = 1
    local: int = 0
    join_timeout: float = JOIN_TIMEOUT

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def local_host(self) -> str:
        """Where a worker of this machine reaches the master."""
        return {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)


def parse_bind(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT`, `:PORT` (every interface) or `HOST` (Locust's port 5557).

    Raises:
        ValueError: not an address.
    """
    host, port = text, str(MASTER_PORT)
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text!r} is not HOST:PORT")
        port = rest[1:] or port
    elif text.count(":") == 1:
        host, port = text.split(":")
    host = host or "0.0.0.0"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    return host, int(port)


@dataclass
class ThresholdVerdict:
    threshold: Threshold
    actual: float | None
    ok: bool

    def line(self) -> str:
        shown = "no data" if self.actual is None else f"{self.actual:.4g}"
        return f"{'PASS' if self.ok else 'FAIL'}  {self.threshold.text}  (actual {shown})"


@dataclass
class FailedSteps:
    """The verdict on failed steps where no `fail_ratio` threshold gives one: none may fail."""

    failed: int
    count: int
    exit_code: int  # the status they give (the scenario's `exit_code_on_error`; 0: failures are the measurement)

    @property
    def ok(self) -> bool:
        return self.failed == 0 or self.exit_code == 0

    def line(self) -> str:
        """PASS or FAIL on "no failed step"; where failures are measured (`exit_code` 0) and some
        failed, no such claim: a NOTE with the count."""
        if self.failed and self.exit_code == 0:
            return (f"NOTE  {self.failed} of {self.count} steps failed  (not judged: --exit-code-on-error 0, "
                    "failures are what the run measures)")
        word = "PASS" if self.ok else "FAIL"
        why = "" if self.ok else "; a fail_ratio threshold or --exit-code-on-error 0 allows failures"
        return f"{word}  no failed step  ({self.failed} of {self.count} failed{why})"


@dataclass
class RunResult:
    out_dir: Path
    summary: dict[str, Any]
    verdicts: list[ThresholdVerdict] = field(default_factory=list)
    locust_exit: int = 0
    # `<file>: <reason>` for each result file that could not be written in full.
    write_errors: list[str] = field(default_factory=list)
    failed_steps: FailedSteps | None = None  # None: a fail_ratio threshold judges failures
    cut_short: str | None = None  # how Locust ended before the run's end (crashed, killed), if it did
    sessions: SessionTally | None = None  # a run of K sessions (`sessions:`): what its sessions did

    @property
    def passed(self) -> bool:
        return all(v.ok for v in self.verdicts)

    @property
    def exit_code(self) -> int:
        """3 for results that could not be written or a run Locust left before its end, 1 for a failed
        threshold, else the status of failed steps (`exit_code_on_error`, as Locust's), else 0; at
        least 1 when a run of K sessions broke one of them or made none."""
        if self.write_errors or self.cut_short:
            return EXIT_ENVIRONMENT  # the disk or the load generator, not the target: the results cannot be trusted
        if not self.passed:
            status = 1
        elif self.failed_steps is not None and not self.failed_steps.ok:
            status = self.failed_steps.exit_code
        else:
            status = 0
        if self.sessions is not None and not self.sessions.kept:
            status = max(status, 1)
        return status

    def suite(self, name: str, output: str = "") -> Any:
        """The run as a CI suite: a test case per threshold, failed when it failed; `output`: the summary table."""
        from mcpbench.ci.cases import FAILED, PASSED, Case, Suite

        total = self.summary.get("total", {})
        notes = [f"{error}: the samples are incomplete" for error in self.write_errors]
        if self.cut_short:
            notes.append(self.cut_short)
        suite = Suite(name, time=self.summary.get("duration_s"),
                      stats={"thresholds": len(self.verdicts), "failed": sum(not v.ok for v in self.verdicts),
                             "requests": total.get("count", ""), "failures": total.get("failures", "")},
                      notes=notes)
        for verdict in self.verdicts:
            suite.cases.append(Case(verdict.threshold.text, "mcpbench.load", PASSED if verdict.ok else FAILED,
                                    message=verdict.line(), detail=verdict.line(), output=output))
        if (steps := self.failed_steps) is not None:  # no fail_ratio threshold: no step may fail
            suite.cases.append(Case("no failed step", "mcpbench.load", PASSED if steps.ok else FAILED,
                                    message=steps.line(), detail=steps.line(), output=output))
        return suite


# --- pre-flight ---------------------------------------------------------------------------------


class _Collect:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def fire(self, **kw: Any) -> None:
        self.events.append(kw)


def preflight(scenario: Scenario, target: Target, access: ClientAccess | None = None,
              echo: Callable[[str], None] = print) -> list[str]:
    """Reach `target` (the scenario's, parsed), run one session, and check the mix's tools exist;
    returns the tool names.

    Raises:
        TargetError: the target (or its proxy) cannot be reached or does not speak MCP.
        CredentialError: the token endpoint refused the credentials.
        ScenarioError: the mix names a tool the server does not have.
    """
    access = access if access is not None else ClientAccess.none()
    if target.transport == STDIO:
        if shutil.which(target.argv[0]) is None:
            raise TargetError(f"cannot start {target}: command {target.argv[0]!r} not found")
    else:
        proxy = access.proxies.route(target.url)
        try:
            with socket.create_connection((proxy.host, proxy.port) if proxy else (target.host, target.port), timeout=5.0):
                pass
        except OSError as exc:
            where = f"the proxy {proxy.url} for {target}" if proxy else str(target)
            raise TargetError(f"cannot reach {where}: {exc.strerror or exc}") from None
        access.headers_now()  # a token endpoint that refuses, or cannot be found: one line, now
    if scenario.sessions is not None:
        return []  # a session probe: whether sessions hold is what it measures, not a precondition
    tools = _session_tools(scenario, target, access, echo)
    wanted = sorted({c.target for c in scenario.mix if c.method == "tools/call" and c.target})
    unknown = [t for t in wanted if t not in tools]
    if unknown and tools:
        line = next((c.line for c in scenario.mix if c.target == unknown[0] and c.line), None)
        raise ScenarioError(
            f"{scenario.source}{'' if line is None else f':{line}'}: unknown tool {unknown[0]!r} (the server at {target} has: {', '.join(sorted(tools)) or 'none'})"
        )
    return tools


def _session_tools(scenario: Scenario, target: Target, access: ClientAccess, echo: Callable[[str], None]) -> list[str]:
    import gevent

    from mcpbench.load.client import McpClient
    from mcpbench.transport.green import transport_for

    timeout = min(scenario.timeout, PREFLIGHT_TIMEOUT)
    events = _Collect()
    client = McpClient(lambda: transport_for(target, timeout=timeout, proxies=access.proxies), events,
                       request_type=target.transport, version=scenario.versions[0], timeout=timeout,
                       headers=access.headers, tokens=access.tokens())

    def first_failure() -> str:
        failed = [e for e in events.events if e.get("exception") is not None]
        return f"{failed[-1]['name']} failed ({failed[-1]['exception']})" if failed else "no answer"

    def check() -> list[str]:
        try:
            if not client.start_session():
                refused = [e["exception"] for e in events.events if getattr(e.get("exception"), "kind", None) in AUTH_FAILURES]
                if refused:  # the server is there and wants credentials: the run shows what that costs
                    echo(f"mcpbench: {target} refused the session ({refused[-1]}): every call will fail so; "
                         "give --header, --bearer-token-env or --oauth-*")
                    return []
                raise TargetError(f"{target}: no MCP session: {first_failure()}")
            names: list[str] = []
            cursor = None
            for _ in range(MAX_TOOL_PAGES):
                result = client.call("tools/list", {"cursor": cursor} if cursor else None)
                if not isinstance(result, dict):
                    if any(c.method == "tools/call" for c in scenario.mix):
                        raise TargetError(f"{target}: tools/list failed: {first_failure()}")
                    return names
                names += [t.get("name") for t in result.get("tools", []) if isinstance(t, dict)]
                cursor = result.get("nextCursor")
                if not cursor:
                    break
            return names
        finally:
            try:
                client.end_session()
            finally:
                client.close_transport()

    def guarded() -> list[str] | McpbenchError:
        try:
            return check()
        except McpbenchError as exc:
            return exc  # raised in this greenlet, gevent's hub would print it with a traceback

    greenlet = gevent.spawn(guarded)
    greenlet.join(timeout=PREFLIGHT_TIMEOUT + 5)
    if not greenlet.ready():
        greenlet.kill()
        client.close_transport()
        raise TargetError(f"{target}: no MCP session within {PREFLIGHT_TIMEOUT:g} s")
    found = greenlet.get()
    if isinstance(found, McpbenchError):
        raise found
    return found


# --- running Locust -----------------------------------------------------------------------------


def default_out_dir(scenario: Scenario) -> Path:
    """A new folder of its own under results/, even for two runs started in the same second."""
    return new_run_folder(RESULTS_DIR, scenario.name)


def _run_seconds(scenario: Scenario) -> int:
    """Locust's `--run-time`: whole seconds, at least one."""
    return max(1, round(scenario.duration))


def locust_command(scenario: Scenario, out_dir: Path, *, ui: bool = False, web_port: int | None = None, fleet: Fleet | None = None, locustfile: Path = LOCUSTFILE) -> list[str]:
    """The `python -m locust …` command line of the run (alone, or its master); it dies with us."""
    cmd = [sys.executable, "-m", "locust", "-f", str(locustfile), "--loglevel", "WARNING"]
    cmd += [
        "-u", str(scenario.users), "-r", f"{scenario.spawn_rate:g}", "--run-time", f"{_run_seconds(scenario)}s",
        "--csv", str(out_dir / "locust"), "--exit-code-on-error", "0",
    ]
    if ui:
        cmd += ["--web-host", WEB_HOST] + (["--web-port", str(web_port)] if web_port else [])
    else:
        cmd += ["--headless", "--only-summary"]
    if fleet is not None:
        cmd += ["--master", "--expect-workers", str(fleet.expect), "--expect-workers-max-wait", f"{max(1, round(fleet.join_timeout))}",
                "--master-bind-host", fleet.host, "--master-bind-port", str(fleet.port)]
    return dying_with_parent(cmd)


def run_scenario(
    scenario: Scenario,
    out_dir: Path | None = None,
    *,
    workers: int = 0,
    fleet: Fleet | None = None,
    ui: bool = False,
    web_port: int | None = None,
    check_target: bool = True,
    echo: Callable[[str], None] = print,
) -> RunResult:
    """Run `scenario` with Locust and return the summary and threshold verdicts.

    `workers`: a master and that many local workers (a `fleet` on 127.0.0.1, any free port);
    `fleet`: a master listening where it says, for workers on other machines (and its own `local` ones).

    A stop signal (Ctrl-C, SIGTERM, SIGHUP) stops Locust; the summary then covers the time that ran
    (`"interrupted": true`), also when no sample came yet. From the stop on, and while the results
    are written, a further signal only sets the exit status: the results are written whole.

    Raises:
        BindError: the master's or the web UI's address cannot be listened on.
        TargetError, ScenarioError: from the pre-flight check (nothing was started).
        WorkersMissing: the master's workers did not all join within its `join_timeout`.
        LoadRunError: Locust failed to start or did not end within the bound.
    """
    if workers and fleet is None:
        fleet = Fleet(port=0, expect=workers, local=workers)
    if fleet is not None:
        if fleet.port == 0:
            fleet = replace(fleet, port=free_port(fleet.host))
        check_listen(fleet.host, fleet.port)  # Locust would only log its own error
    if ui:
        check_listen(WEB_HOST, web_port or WEB_PORT)  # Locust would only print its own traceback
    target = parse_target(scenario.target)
    access = scenario.client.resolve(target.url)  # a header, variable, file or proxy that cannot be used: one line
    if check_target:
        preflight(scenario, target, access, echo)
    out_dir = Path(out_dir) if out_dir else default_out_dir(scenario)
    out_dir.mkdir(parents=True, exist_ok=True)
    scenario_path = out_dir / "scenario.json"
    # Results get shared: the target's secrets (`?api_key=`) stay out of the file, the processes get
    # the target as given through their environment (or the run's locustfile, in a private folder).
    public = scenario.to_json() | {"target": Redactor().text(scenario.target)}
    write_atomic(scenario_path, orjson.dumps(public, option=orjson.OPT_INDENT_2))
    env = dict(os.environ)
    env.update(
        MCPBENCH_ACCESS=access.to_env(scenario.client.proxy),
        MCPBENCH_TARGET=scenario.target,
        MCPBENCH_SCENARIO=str(scenario_path.resolve()),
        MCPBENCH_SAMPLES=str(out_dir.resolve()),
        MCPBENCH_PROCESSES="1",
        PYTHONUNBUFFERED="1",
    )
    # the package must be importable by the locust processes wherever the user runs from
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for old in [*out_dir.glob("samples*.jsonl"), out_dir / ROSTER_FILE]:
        old.unlink(missing_ok=True)
    # The Locust processes say here which sample file they could not write (a pipe: no disk needed).
    status_read, status_write = os.pipe()
    env["MCPBENCH_STATUS_FD"] = str(status_write)

    limit = scenario.duration + RUN_MARGIN + (fleet.join_timeout + DRAIN_TIMEOUT if fleet else 0)
    deadline = time.monotonic() + limit
    log_path = out_dir / "locust.log"
    procs: list[subprocess.Popen] = []
    folders: list[Path] = []
    interrupted = False
    locustfile = LOCUSTFILE
    if fleet is not None:  # the run's own locustfile, private: it holds the target as given
        folders.append(Path(tempfile.mkdtemp(prefix="mcpbench-run-")))
        locustfile = folders[0] / RUNFILE_NAME
        locustfile.write_text(runfile_text(scenario, workers=fleet.expect, version=__version__))
    started = time.monotonic()
    with open(log_path, "wb") as log:
        out = None if ui else log
        try:
            main = start(
                locust_command(scenario, out_dir, ui=ui, web_port=web_port, fleet=fleet, locustfile=locustfile),
                env=env, stdout=out, stderr=out if not ui else None, stdin=subprocess.DEVNULL, pass_fds=(status_write,),
            )
            procs.append(main)
            if fleet is not None and not fleet.local:
                echo(f"mcpbench: master on {fleet.address}, waiting {fleet.join_timeout:g} s for {fleet.expect} worker(s): "
                     f"mcpbench load --worker --master-host HOST --master-port {fleet.port}")
            for _ in range(fleet.local if fleet else 0):
                worker, folder = start_worker(fleet.local_host, fleet.port, log=log, access=env["MCPBENCH_ACCESS"])
                procs.append(worker)
                folders.append(folder)
            if ui:
                echo(f"mcpbench: Locust web UI on http://{WEB_HOST}:{web_port or WEB_PORT} (Ctrl-C to stop)")
            try:
                main.wait(None if ui else max(1.0, deadline - time.monotonic()))
                # The master told its workers to quit; one that gave up waiting told them nothing.
                end = time.monotonic() + (WORKERS_QUIT if main.returncode == 0 else 0)
                for worker in procs[1:]:
                    try:
                        worker.wait(max(0.0, end - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        break
            except subprocess.TimeoutExpired:
                raise LoadRunError(f"the locust run did not end within {limit:g} s; stopped (log: {log_path})") from None
        except KeyboardInterrupt:  # a stop signal: stop Locust, report on the time that ran
            interrupted = True
        finally:
            ran = time.monotonic() - started
            with stop_signals_noted():
                for proc in procs:
                    stop_process(proc, LOCUST_STOP_GRACE + (DRAIN_TIMEOUT if proc is procs[0] and fleet else 0), signals=(signal.SIGINT,))
                os.close(status_write)
                write_errors = _read_status(status_read)
                for folder in folders:
                    shutil.rmtree(folder, ignore_errors=True)
    with stop_signals_noted():
        return _report(scenario, out_dir, procs, fleet, log_path, write_errors, ran, interrupted)


def _report(scenario: Scenario, out_dir: Path, procs: list[subprocess.Popen], fleet: Fleet | None, log_path: Path,
            write_errors: list[str], ran: float, interrupted: bool) -> RunResult:
    """Merge the samples, write the summary with the threshold verdicts; `ran`: the seconds Locust
    ran, `interrupted`: whether a stop signal ended it."""
    # A run that ends by the clock ends no sooner than its run time (Locust counts it once started):
    # sooner, something stopped Locust (a SIGTERM ends it as cleanly as the clock).
    timed = scenario.replay is None and scenario.ramp is None and scenario.sessions is None and scenario.calls is None
    early = timed and ran < _run_seconds(scenario)
    if scenario.replay is not None or scenario.ramp is not None:
        # It ends on its own (a recorded schedule once its sessions ran, a capacity ramp after its break):
        # no planned duration, so that its rate is over the span of its samples, as an interrupted run's.
        scenario = replace(scenario, duration=0.0)
    locust_exit = procs[0].returncode if procs else -1
    roster = _read_roster(out_dir / ROSTER_FILE) if fleet else None
    parts = sorted(out_dir.glob("samples.*.jsonl"))
    merged = out_dir / "samples.jsonl"
    per_process: list[int] | None = None
    try:
        per_process = samples_mod.merge(parts, merged)
    except OSError as exc:  # the parts stay where they are, complete as far as they were written
        write_errors.append(f"{merged}: {exc.strerror or exc}")
        merged = parts
    # Locust ends with status 0 (`--exit-code-on-error 0`) unless it crashed or was killed: a run it
    # left before its end is no whole measurement, however good its samples look (exit 3, said).
    cut_short = (locust_exit not in (0, None) or early) and not interrupted
    # Interrupted or cut short, the run lasted as long as its samples span, not the scenario's duration; so
    # does a run of K sessions (`sessions:`) or calls (`calls:`), which ends when they have (its steps per second are over that span).
    planned = None if interrupted or cut_short or scenario.sessions is not None or scenario.calls is not None else scenario.duration
    from mcpbench.load import histograms  # numpy and hdrh: only at the end of a run

    columns = histograms.Columns() if isinstance(merged, Path) else None  # the histograms from the summary's pass
    summary = samples_mod.summarize(merged, planned, columns)
    if interrupted and not summary["total"]["count"]:
        summary["duration_s"] = round(ran, 3)  # stopped before any sample: the time Locust ran
    summary["interrupted"] = interrupted
    if scenario.input_responses and any("operation" in row for row in summary["steps"]):
        # An answer the server never asked for is a warning, not a failure: the scenario may outlive a tool.
        if never := sorted(set(scenario.input_responses) - set(summary.get("input_asked", ()))):
            summary["input_never_asked"] = never
    if fleet is not None and summary["total"]["count"] == 0 and not interrupted:
        _check_joined(fleet, roster, log_path)
    if roster is not None:  # the master writes what its workers sent: it produced none itself
        per_process = [0, *(row["received"] for row in roster["samples_per_worker"].values())]
        summary.update(roster)
    if per_process is not None:  # lines per Locust process (with a master: its 0, then each worker's)
        summary["samples_per_process"] = per_process
    if locust_exit not in (0, None) and summary["total"]["count"] == 0 and not interrupted:
        raise LocustFailed(f"locust {ended(locust_exit)}: {last_line(log_path) or 'no output'} (log: {log_path})")
    verdicts = [ThresholdVerdict(t, actual := samples_mod.metric(summary, t.metric, t.step), t.check(actual)) for t in scenario.thresholds]
    result = RunResult(out_dir, summary, verdicts, locust_exit)
    if cut_short:
        how = f"{ended(locust_exit)} ({last_line(log_path) or 'no output'})" if locust_exit else "stopped"  # (0: its stats table)
        length = f"of a {_run_seconds(scenario)} s run" if timed else "before the run's end"
        result.cut_short = summary["locust_cut_short"] = (
            f"locust {how} after {ran:.1f} s {length} (log: {log_path}); the summary covers the {summary['duration_s']:.1f} s its samples span")
    if scenario.sessions is not None:  # were sessions kept? (the samples are merged by now)
        result.sessions = count_sessions(read_samples(merged), SessionTally())
    if not scenario.judges_failures:
        total = summary["total"]
        result.failed_steps = FailedSteps(total["failures"], total["count"], scenario.exit_code_on_error)
    summary["thresholds"] = [{"threshold": v.threshold.text, "actual": v.actual, "ok": v.ok} for v in verdicts]
    summary["exit_code_on_error"] = scenario.exit_code_on_error
    summary["locust_exit"] = locust_exit
    if write_errors:
        summary["samples_incomplete"] = write_errors
    try:
        write_atomic(out_dir / "summary.json", orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    except OSError as exc:  # the summary is still printed
        write_errors.append(f"{out_dir / 'summary.json'}: {exc.strerror or exc}")
    if columns is not None:  # per-step HDR histograms, what `mcpbench compare` reads
        try:
            histograms.write(out_dir, columns.steps())
        except OSError as exc:
            write_errors.append(f"{out_dir / histograms.FILE}: {exc.strerror or exc}")
    result.write_errors = write_errors
    return result


def _read_roster(path: Path) -> dict[str, Any]:
    """The master's account of its workers (then removed: the summary holds it); empty when none joined."""
    try:
        roster = orjson.loads(path.read_bytes())
        path.unlink()
    except (OSError, orjson.JSONDecodeError):
        roster = {}
    return {"samples_per_worker": {}, "samples_lost": {"dropped": 0, "in_transit": 0}, "workers_died": []} | roster


def _check_joined(fleet: Fleet, roster: dict[str, Any] | None, log_path: Path) -> None:
    """A master that ran nothing: were its workers missing?

    Raises:
        WorkersMissing: fewer workers than expected joined within the join timeout.
    """
    joined = len((roster or {}).get("samples_per_worker", {}))
    if joined >= fleet.expect:
        return
    hint = f" (log: {log_path})" if fleet.local else ""
    if joined == 0:
        raise WorkersMissing(f"no worker reached the master on {fleet.address} within {fleet.join_timeout:g} s{hint}")
    raise WorkersMissing(f"only {joined} of {fleet.expect} workers reached the master on {fleet.address} within {fleet.join_timeout:g} s{hint}")


def _read_status(fd: int) -> list[str]:
    """The lines the Locust processes wrote on the status pipe (they have ended), then close it."""
    os.set_blocking(fd, False)  # a grandchild that kept the write end open must not hold the run
    with open(fd, "rb", buffering=0) as pipe:
        data = pipe.read() or b""  # one line per process at most: far below the pipe's capacity
    return [line for line in data.decode(errors="replace").splitlines() if line.strip()]
