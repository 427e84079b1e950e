"""The long runs that several tests read, each made once per test session by the root conftest.

They are started in the background when the session's first test starts, and awaited by the first
test that reads one (the conftest runs those tests last): their minutes are mostly fixed-length load
and fault windows, which overlap the rest of the suite instead of adding to it.

With pytest-xdist's workers, one run serves them all: the first worker to claim it (a lock file in
the workers' common temporary folder) starts it and writes its outcome there when it ends
(`SharedRun`); the others wait for that file (`AwaitedRun`).
"""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Final

import orjson

from mcpbench.load.runner import LOCUST_STOP_GRACE
from mcpbench.cli.pipeline import CHILD_STOP_WAIT
from tests.support.servers import REPO_ROOT, STOP_TIMEOUT, stop_process

MCPBENCH: Final = [sys.executable, "-m", "mcpbench"]
# The main job takes at most 3 minutes; more on a busy 2-core machine.
MAIN_JOB_TIMEOUT: Final = 900
LAB_TIMEOUT: Final = 300
# How long each may take to stop on SIGTERM, its own bounds: a kill sooner would orphan its children.
# The main job: its stage's command (CHILD_STOP_WAIT), then its two reference servers.
MAIN_JOB_STOP: Final = CHILD_STOP_WAIT + 2 * STOP_TIMEOUT
# A lab run: its cell's Locust (LOCUST_STOP_GRACE), then the cell's instances, proxy and balancer.
LAB_STOP: Final = LOCUST_STOP_GRACE + 3 * STOP_TIMEOUT

# A small reconnect experiment: one cut Streamable HTTP cell per policy, the SDK client too. Each cell makes
# 3 calls, counted, not timed (a busy machine's Locust start-up once left a 5 s cell no call); 30 s the bound.
RECONNECT_SCENARIO: Final = """\
name: reconnect-test
transports: [streamable-http]
faults:
  cut: {cut_streams_after: 1s}
policies: [none, resume]
sdk_client: true
reconnect: {idempotent: [echo], attempts: 1}
era: [handshake, 2026-07-28]
mix:
  - call: tools/call
    tool: slow
    arguments: {seconds: 1.5, steps: 6}
    progress: true
users: 1
spawn_rate: 1
calls: 3
duration: 30s
timeout: 10s
"""


class BackgroundRun:
    """A command started now and awaited later; its output goes to files beside `out`, so no pipe fills."""

    def __init__(self, args: list[str], out: Path, timeout: float, stop_grace: float) -> None:
        self.out, self._stop_grace = out, stop_grace
        self._stdout, self._stderr = out.parent / f"{out.name}.stdout", out.parent / f"{out.name}.stderr"
        self._deadline = time.monotonic() + timeout  # the run's bound, as subprocess.run(timeout=) gave it
        with open(self._stdout, "wb") as stdout, open(self._stderr, "wb") as stderr:
            self.proc = subprocess.Popen([*MCPBENCH, *args], stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, cwd=REPO_ROOT)
        self._done: subprocess.CompletedProcess | None = None

    def result(self) -> subprocess.CompletedProcess:
        """Wait (bounded) for the end: the process's status and output, as subprocess.run returns them."""
        if self._done is None:
            self.proc.wait(max(0.0, self._deadline - time.monotonic()))
            self._done = subprocess.CompletedProcess(self.proc.args, self.proc.returncode,
                                                     self._stdout.read_text(errors="replace"), self._stderr.read_text(errors="replace"))
        return self._done

    def stop(self) -> None:
        """SIGTERM (every mcpbench command stops its children on it), then SIGKILL if it lingers past its own bound."""
        stop_process(self.proc, self._stop_grace)


class SharedRun:
    """A `BackgroundRun` this worker started for every worker: its outcome, once known, goes to `done`."""

    def __init__(self, run: BackgroundRun, done: Path) -> None:
        self.run, self.out, self._done = run, run.out, done
        self._lock = threading.Lock()
        # Written when the run ends, whether or not a test of this worker reads it.
        self._writer = threading.Thread(target=self.result, daemon=True)
        self._writer.start()

    def result(self) -> subprocess.CompletedProcess:
        with self._lock:
            return self._result()

    def _result(self) -> subprocess.CompletedProcess:
        result = self.run.result()
        if not self._done.exists():
            partial = self._done.with_suffix(".part")
            partial.write_bytes(orjson.dumps({"args": result.args, "returncode": result.returncode,
                                              "stdout": result.stdout, "stderr": result.stderr, "out": str(self.out)}))
            partial.rename(self._done)  # whole or absent: a waiter never reads half of it
        return result

    def stop(self) -> None:
        """Other workers may still need it: wait for its end (within its own bound), then stop it."""
        try:
            self.result()
        finally:
            self.run.stop()


class AwaitedRun:
    """A run another worker started: its outcome (and `out`, its folder) read from `done` once that worker wrote it."""

    def __init__(self, done: Path, timeout: float) -> None:
        self.out: Path | None = None
        self._done = done
        self._deadline = time.monotonic() + timeout

    def result(self) -> subprocess.CompletedProcess:
        while not self._done.exists():  # a file another process writes: polled, bounded by the run's own limit
            if time.monotonic() > self._deadline:
                raise TimeoutError(f"the long run another worker runs did not end in time (no {self._done})")
            time.sleep(0.2)
        data = orjson.loads(self._done.read_bytes())
        self.out = Path(data["out"])
        return subprocess.CompletedProcess(data["args"], data["returncode"], data["stdout"], data["stderr"])

    def stop(self) -> None:
        pass  # the worker that started it stops it


def claimed(shared: Path, name: str) -> bool:
    """Whether this worker is the first to claim the long run `name` in `shared` (an exclusive create)."""
    try:
        os.close(os.open(shared / f"{name}.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def main_job(folder: Path) -> BackgroundRun:
    """`mcpbench run --out FOLDER/run`, as `./dev run` runs it."""
    out = folder / "run"
    return BackgroundRun(["run", "--out", str(out)], out, MAIN_JOB_TIMEOUT, MAIN_JOB_STOP)


def reconnect_experiment(folder: Path) -> BackgroundRun:
    """`mcpbench lab run` on RECONNECT_SCENARIO, into `FOLDER/out`."""
    path = folder / "reconnect.yaml"
    path.write_text(RECONNECT_SCENARIO)
    out = folder / "out"
    return BackgroundRun(["lab", "run", str(path), "--out", str(out)], out, LAB_TIMEOUT, LAB_STOP)
