"""Run a scenario with Locust in its own processes, then check thresholds.

`run_scenario()` writes `<out>/scenario.json`, starts `python -m locust` on the
generic locustfile (headless, `--csv`, `--run-time`; or a master plus N local
workers), bounds it in time, merges the raw samples, and returns a summary with
the threshold verdicts. Locust never loads in this process: it monkey-patches
whatever imports it.

The pre-flight check (`preflight()`) runs one real session against the target
with the same client the users use (gevent without monkey-patching), so an
unreachable target or an unknown tool fails with one line before any user spawns.

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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import orjson

from mcpbench.load import samples as samples_mod
from mcpbench.load.scenario import Scenario, ScenarioError, Threshold
from mcpbench.listen import check_listen
from mcpbench.outputs import new_run_folder, write_atomic
from mcpbench.protocol.errors import EXIT_ENVIRONMENT, McpbenchError, TargetError
from mcpbench.target import STDIO, parse_target
from mcpbench.trace.redact import Redactor

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
RESULTS_DIR = Path("results")
# Locust's startup (imports, gevent patching) and shutdown, on top of the run time: a run that
# takes this much longer than asked is stuck and gets killed.
RUN_MARGIN = 90.0
# Where Locust's web UI listens (`--ui`): loopback, on Locust's default port unless --web-port.
WEB_HOST, WEB_PORT = "127.0.0.1", 8089
# How long workers get to connect before the master gives up.
WORKER_WAIT = 60
# A pre-flight check gives up after this long (a stdio server may need seconds to import).
PREFLIGHT_TIMEOUT = 30.0
# Pages of tools/list followed when checking tool names.
MAX_TOOL_PAGES = 20


class LoadRunError(McpbenchError):
    """A load run could not be carried out (Locust failed to start, or never ended)."""


@dataclass
class Verdict:
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
        word = "PASS" if self.ok else "FAIL"
        why = "" if self.ok or self.exit_code == 0 else "; a fail_ratio threshold or --exit-code-on-error 0 allows failures"
        measured = " (failures measured: --exit-code-on-error 0)" if self.failed and self.exit_code == 0 else ""
        return f"{word}  no failed step  ({self.failed} of {self.count} failed{why}){measured}"


@dataclass
class RunResult:
    out_dir: Path
    summary: dict[str, Any]
    verdicts: list[Verdict] = field(default_factory=list)
    locust_exit: int = 0
    # `<file>: <reason>` for each result file that could not be written in full.
    write_errors: list[str] = field(default_factory=list)
    failed_steps: FailedSteps | None = None  # None: a fail_ratio threshold judges failures

    @property
    def passed(self) -> bool:
        return all(v.ok for v in self.verdicts)

    @property
    def exit_code(self) -> int:
        """3 for results that could not be written, 1 for a failed threshold, else the status of
        failed steps (`exit_code_on_error`, as Locust's), else 0."""
        if self.write_errors:
            return EXIT_ENVIRONMENT  # the disk, not the target: the results cannot be trusted
        if not self.passed:
            return 1
        if self.failed_steps is not None and not self.failed_steps.ok:
            return self.failed_steps.exit_code
        return 0

    def suite(self, name: str, output: str = "") -> Any:
        """The run as a CI suite: a test case per threshold, failed when it failed; `output`: the summary table."""
        from mcpbench.ci.cases import FAILED, PASSED, Case, Suite

        total = self.summary.get("total", {})
        suite = Suite(name, time=self.summary.get("duration_s"),
                      stats={"thresholds": len(self.verdicts), "failed": sum(not v.ok for v in self.verdicts),
                             "requests": total.get("count", ""), "failures": total.get("failures", "")},
                      notes=[f"{error}: the samples are incomplete" for error in self.write_errors])
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


def preflight(scenario: Scenario) -> list[str]:
    """Reach the target, run one session, and check the mix's tools exist; returns the tool names.

    Raises:
        TargetError: the target cannot be reached or does not speak MCP.
        ScenarioError: the mix names a tool the server does not have.
    """
    target = parse_target(scenario.target)
    if target.transport == STDIO:
        if shutil.which(target.argv[0]) is None:
            raise TargetError(f"cannot start {target}: command {target.argv[0]!r} not found")
    else:
        try:
            with socket.create_connection((target.host, target.port), timeout=5.0):
                pass
        except OSError as exc:
            raise TargetError(f"cannot reach {target}: {exc.strerror or exc}") from None
    if scenario.sessions is not None:
        return []  # a session probe: whether sessions hold is what it measures, not a precondition
    tools = _session_tools(scenario)
    wanted = sorted({c.target for c in scenario.mix if c.method == "tools/call" and c.target})
    unknown = [t for t in wanted if t not in tools]
    if unknown and tools:
        line = next((c.line for c in scenario.mix if c.target == unknown[0] and c.line), None)
        raise ScenarioError(
            f"{scenario.source}{'' if line is None else f':{line}'}: unknown tool {unknown[0]!r} (the server at {target} has: {', '.join(sorted(tools)) or 'none'})"
        )
    return tools


def _session_tools(scenario: Scenario) -> list[str]:
    import gevent

    from mcpbench.load.client import McpClient
    from mcpbench.load.transports import transport_for

    target = parse_target(scenario.target)
    timeout = min(scenario.timeout, PREFLIGHT_TIMEOUT)
    events = _Collect()
    client = McpClient(lambda: transport_for(target, timeout=timeout), events, request_type=target.transport, version=scenario.versions[0], timeout=timeout)

    def first_failure() -> str:
        failed = [e for e in events.events if e.get("exception") is not None]
        return f"{failed[-1]['name']} failed ({failed[-1]['exception']})" if failed else "no answer"

    def check() -> list[str]:
        try:
            if not client.start_session():
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def locust_command(scenario: Scenario, out_dir: Path, *, ui: bool = False, web_port: int | None = None, role: str = "standalone", master_port: int | None = None, workers: int = 0) -> list[str]:
    """The `python -m locust …` command line for one process of the run."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "WARNING"]
    if role == "worker":
        return cmd + ["--worker", "--master-host", "127.0.0.1", "--master-port", str(master_port)]
    cmd += [
        "-u", str(scenario.users), "-r", f"{scenario.spawn_rate:g}", "--run-time", f"{max(1, round(scenario.duration))}s",
        "--csv", str(out_dir / "locust"), "--exit-code-on-error", "0",
    ]
    if ui:
        cmd += ["--web-host", WEB_HOST] + (["--web-port", str(web_port)] if web_port else [])
    else:
        cmd += ["--headless", "--only-summary"]
    if role == "master":
        cmd += ["--master", "--expect-workers", str(workers), "--expect-workers-max-wait", str(WORKER_WAIT),
                "--master-bind-host", "127.0.0.1", "--master-bind-port", str(master_port)]
    return cmd


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # Locust writes its CSVs on SIGINT
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()


def run_scenario(
    scenario: Scenario,
    out_dir: Path | None = None,
    *,
    workers: int = 0,
    ui: bool = False,
    web_port: int | None = None,
    check_target: bool = True,
    echo: Callable[[str], None] = print,
) -> RunResult:
    """Run `scenario` with Locust and return the summary and threshold verdicts.

    Raises:
        TargetError, ScenarioError: from the pre-flight check (nothing was started).
        LoadRunError: Locust failed to start or did not end within the bound.
    """
    if ui:
        check_listen(WEB_HOST, web_port or WEB_PORT)  # Locust would only print its own traceback
    if check_target:
        preflight(scenario)
    out_dir = Path(out_dir) if out_dir else default_out_dir(scenario)
    out_dir.mkdir(parents=True, exist_ok=True)
    scenario_path = out_dir / "scenario.json"
    # Results get shared: the target's secrets (`?api_key=`) stay out of the file, the processes get
    # the target as given through their environment.
    public = scenario.to_json() | {"target": Redactor().text(scenario.target)}
    write_atomic(scenario_path, orjson.dumps(public, option=orjson.OPT_INDENT_2))
    env = dict(os.environ)
    env.update(
        MCPBENCH_TARGET=scenario.target,
        MCPBENCH_SCENARIO=str(scenario_path.resolve()),
        MCPBENCH_SAMPLES=str(out_dir.resolve()),
        MCPBENCH_PROCESSES=str(max(1, workers)),
        PYTHONUNBUFFERED="1",
    )
    # the package must be importable by the locust processes wherever the user runs from
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for old in out_dir.glob("samples*.jsonl"):
        old.unlink()
    # The Locust processes say here which sample file they could not write (a pipe: no disk needed).
    status_read, status_write = os.pipe()
    env["MCPBENCH_STATUS_FD"] = str(status_write)

    deadline = time.monotonic() + scenario.duration + RUN_MARGIN + (WORKER_WAIT if workers else 0)
    log_path = out_dir / "locust.log"
    procs: list[subprocess.Popen] = []
    interrupted = False
    master_port = _free_port() if workers else None
    role = "master" if workers else "standalone"
    with open(log_path, "wb") as log:
        out = None if ui else log
        try:
            main = subprocess.Popen(
                locust_command(scenario, out_dir, ui=ui, web_port=web_port, role=role, master_port=master_port, workers=workers),
                env=env, stdout=out, stderr=out if not ui else None, stdin=subprocess.DEVNULL, pass_fds=(status_write,),
            )
            procs.append(main)
            for _ in range(workers):
                procs.append(subprocess.Popen(
                    locust_command(scenario, out_dir, role="worker", master_port=master_port),
                    env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL, pass_fds=(status_write,),
                ))
            if ui:
                echo(f"mcpbench: Locust web UI on http://{WEB_HOST}:{web_port or WEB_PORT} (Ctrl-C to stop)")
            try:
                main.wait(None if ui else max(1.0, deadline - time.monotonic()))
                for worker in procs[1:]:
                    try:
                        worker.wait(15)
                    except subprocess.TimeoutExpired:
                        pass
            except subprocess.TimeoutExpired:
                raise LoadRunError(f"the locust run did not end within {scenario.duration + RUN_MARGIN:g} s; stopped (log: {log_path})") from None
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop Locust, report on the time that ran
                interrupted = True
        finally:
            for proc in procs:
                _stop(proc)
            os.close(status_write)
            write_errors = _read_status(status_read)
    locust_exit = procs[0].returncode if procs else -1
    parts = sorted(out_dir.glob("samples.*.jsonl"))
    merged = out_dir / "samples.jsonl"
    per_process: list[int] | None = None
    try:
        per_process = samples_mod.merge(parts, merged)
    except OSError as exc:  # the parts stay where they are, complete as far as they were written
        write_errors.append(f"{merged}: {exc.strerror or exc}")
        merged = parts
    # Interrupted, the run lasted as long as its samples span, not the scenario's duration.
    summary = samples_mod.summarize(merged, None if interrupted else scenario.duration)
    summary["interrupted"] = interrupted
    if per_process is not None:  # lines per Locust process (with --workers: the master's, empty, and each worker's)
        summary["samples_per_process"] = per_process
    if locust_exit not in (0, None) and summary["total"]["count"] == 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] if log_path.exists() else []
        raise LoadRunError(f"locust exited with {locust_exit}: {tail[0] if tail else 'no output'} (log: {log_path})")
    verdicts = [Verdict(t, actual := samples_mod.metric(summary, t.metric, t.step), t.check(actual)) for t in scenario.thresholds]
    result = RunResult(out_dir, summary, verdicts, locust_exit)
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
    result.write_errors = write_errors
    return result


def _read_status(fd: int) -> list[str]:
    """The lines the Locust processes wrote on the status pipe (they have ended), then close it."""
    os.set_blocking(fd, False)  # a grandchild that kept the write end open must not hold the run
    with open(fd, "rb", buffering=0) as pipe:
        data = pipe.read() or b""  # one line per process at most: far below the pipe's capacity
    return [line for line in data.decode(errors="replace").splitlines() if line.strip()]
