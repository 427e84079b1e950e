"""What the load tests share: `mcpbench load` as a bounded subprocess, scenarios from text."""

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcpbench.load.scenario import Scenario, ScenarioError, scenario_from_node
from tests.support.servers import REPO_ROOT
from tests.support.traces import handshake, header, tool_call, tool_text, write_trace

# Every load run is bounded: load seconds plus locust startup/shutdown, well under this.
RUN_TIMEOUT = 90


def scenario_from_text(text: str, source: str = "<text>") -> Scenario:
    """A scenario from YAML text, its messages naming `source` (mcpbench itself reads files: `load_scenario`)."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: not valid YAML: {exc}") from None
    return scenario_from_node(root, source)


def load_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "mcpbench", "load", *map(str, args)]


@contextlib.contextmanager
def load_running(tmp_path: Path, scenario: str) -> Iterator[tuple[subprocess.Popen, Path]]:
    """`mcpbench load` of `scenario` (YAML text) into `tmp_path`/out, started (its output piped): the
    test acts on it mid-run; killed at the end if it still runs."""
    path = tmp_path / "scenario.yaml"
    path.write_text(scenario)
    out = tmp_path / "out"
    run = subprocess.Popen(load_cmd(path, "--out", out), cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield run, out
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()


def samples_written(run: subprocess.Popen, out: Path, enough: Callable[[list[Path]], bool], within: float = 60) -> list[Path]:
    """A running load's sample files (`samples.<pid of its Locust process>.jsonl`, flushed every
    second) once `enough` of them; the test fails when the run ends or `within` seconds pass first."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and run.poll() is None:
        parts = sorted(out.glob("samples.*.jsonl"))
        if enough(parts):
            return parts
        time.sleep(0.1)
    pytest.fail(f"not enough samples in {out} before {'the run ended' if run.poll() is not None else 'the deadline'}")


def run_load(tmp_path: Path, scenario: str | None, *args, timeout: float = RUN_TIMEOUT) -> tuple[subprocess.CompletedProcess, Path]:
    """`mcpbench load` of `scenario` (YAML text; None: none, say --target and --from-trace) into `tmp_path`/out."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "scenario.yaml"
    if scenario is not None:
        path.write_text(scenario)
    out = tmp_path / "out"
    given = [path] if scenario is not None else []
    proc = subprocess.run(load_cmd(*given, "--out", out, *args), cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)
    return proc, out


def spaced_trace(path: Path, sessions: list[tuple[float, list[float]]], *, start: float = 1_800_000_000.0) -> Path:
    """A recorded stdio trace of sessions that begin at the given offsets (seconds), each making an
    `echo` call at each of its own offsets from its start (its handshake at 0), every answer 5 ms later."""
    events = []
    for number, (offset, calls) in enumerate(sessions):
        session, begun = f"s{number}", start + offset
        events += handshake(begun, session=session, step=0.005, capabilities={"tools": {}})
        for index, at in enumerate(calls, start=1):
            events += [tool_call(begun + at, index, "echo", {"text": f"s{number}c{index}"}, session=session),
                       tool_text(begun + at + 0.005, index, f"s{number}c{index}", session=session)]
    return write_trace(path, sorted(events, key=lambda event: event["ts"]), header=header(ts=start))
