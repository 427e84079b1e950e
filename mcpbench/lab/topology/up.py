"""`mcpbench lab up` / `lab down`: a lab that runs until a signal, in the foreground or detached.

In the foreground the lab runs until SIGINT, SIGTERM or SIGHUP (exit 130, 143, 129), or until one of its
processes dies (exit 3); every instance and the balancer are stopped first. While it runs, a state
file in `results/lab-up/<pid>.json` names its URL and folder; detached (`--detach`), the command
starts the same lab as a new session in the background, waits until its state file says it is up,
prints it and returns. `lab down` sends SIGTERM to every lab with a state file and waits for each
to end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import orjson

from mcpbench.cliutil import signal_status
from mcpbench.lab.peers.quirks import Quirks
from mcpbench.lab.topology.cluster import Lab, LabError, RestartPlan, running_lab
from mcpbench.files.outputs import new_run_folder, write_atomic
from mcpbench.system.processes import STOP_SIGNALS

STATE_DIR: Final = Path("results") / "lab-up"
# How often a foreground lab checks that its processes still run: a dead instance is noticed
# within this, at the cost of one waitpid per process.
HEALTH_INTERVAL: Final = 0.5
# A detached lab starts N Python servers and the balancer; on a busy 2-core machine that can take a
# while, and a lab that is not up by then has failed.
DETACH_TIMEOUT: Final = 120.0
# `lab down` waits this long for a lab to stop its processes (each gets 5 s to exit) before giving up.
DOWN_TIMEOUT: Final = 60.0
EXIT_ENVIRONMENT: Final = 3


class _Stopped(BaseException):
    """A signal asked the lab to stop (a BaseException: nothing in between may swallow it)."""

    def __init__(self, code: int) -> None:
        self.code = code


def describe(lab: Lab) -> list[str]:
    lines = [f"mcpbench: lab up: {lab.url}  ({lab.transport}, {len(lab.instances)} instance(s), {lab.balancer.kind} balancer, policy {lab.balancer.policy})"]
    lines += [f"  {name}: {server.url}" for name, server in zip(lab.names, lab.instances)]
    if lab.balancer.config is not None:
        lines.append(f"  HAProxy configuration: {lab.balancer.config}")
    if lab.fault_log is not None:
        lines.append(f"  fault log: {lab.fault_log}")
    lines.append(f"  folder: {lab.folder}")
    return lines


def run_foreground(
    *, instances: int, transport: str, policy: str, balancer: str, json_response: bool, stateless: bool,
    port: int | None, say: Callable[[str], None], resumable: bool = False, faults: dict | None = None,
    restarts: RestartPlan | None = None, fault_log: Path | None = None, quirks: Quirks | None = None,
    foreign_host: str = "refuse", serve_args: Sequence[str] = (),
) -> int:
    """Run a lab until a signal; returns the exit status (130 SIGINT, 143 SIGTERM, 129 SIGHUP, 3 a process died).

    `faults`, `restarts`, `fault_log`, `quirks`, `foreign_host`, `serve_args`: as `cluster.running_lab` takes them.
    """
    def stop(signum: int, _frame: object) -> None:
        raise _Stopped(signal_status(signum))

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    state = STATE_DIR / f"{os.getpid()}.json"
    try:
        folder = new_run_folder(Path("results"), "lab")
        with running_lab(
            instances, transport, policy=policy, balancer=balancer, json_response=json_response,
            stateless=stateless, port=port, folder=folder, resumable=resumable, faults=faults, restarts=restarts,
            fault_log=fault_log, quirks=quirks, foreign_host=foreign_host, serve_args=serve_args,
        ) as lab:
            for line in describe(lab):
                say(line)
            STATE_DIR.mkdir(parents=True, exist_ok=True)
            write_atomic(state, orjson.dumps({"pid": os.getpid(), "url": lab.url, "folder": str(folder), "lines": describe(lab)}))
            while True:
                dead = lab.dead_process()  # instances restarted on purpose are not dead
                if dead is not None:
                    say(f"mcpbench: lab process {dead.pid} ({Path(str(dead.args[0])).name}) exited with {dead.returncode}; stopping the lab")
                    return EXIT_ENVIRONMENT
                time.sleep(HEALTH_INTERVAL)
    except _Stopped as stopped:
        return stopped.code
    finally:
        with contextlib.suppress(FileNotFoundError):
            state.unlink()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_detached(argv: Sequence[str], say: Callable[[str], None]) -> int:
    """Start `mcpbench lab up ARGV` (without --detach) in the background; return once it is up."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    log = new_run_folder(Path("results"), "lab-detached") / "lab-up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcpbench", "lab", "up", *argv], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            start_new_session=True,  # not stopped by the terminal's Ctrl-C; `lab down` stops it
        )
    state = STATE_DIR / f"{proc.pid}.json"
    deadline = time.monotonic() + DETACH_TIMEOUT
    while not state.exists():
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:]
            raise LabError(f"the lab did not start: {tail[0] if tail else f'exit {proc.returncode}'} (log: {log})")
        if time.monotonic() > deadline:
            proc.terminate()
            proc.wait()
            raise LabError(f"the lab was not up within {DETACH_TIMEOUT:g} s; stopped (log: {log})")
        time.sleep(HEALTH_INTERVAL / 5)
    for line in orjson.loads(state.read_bytes())["lines"]:
        say(line)
    say(f"mcpbench: running as process {proc.pid}; stop it with: mcpbench lab down")
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def down(say: Callable[[str], None]) -> int:
    """Stop every lab that has a state file; returns 0, or 1 if one did not stop in time."""
    states = sorted(STATE_DIR.glob("*.json")) if STATE_DIR.is_dir() else []
    if not states:
        say("mcpbench: no lab is up")
        return 0
    status = 0
    for state in states:
        try:
            info = orjson.loads(state.read_bytes())
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            say(f"mcpbench: {state}: not a lab state file; removed")
            state.unlink(missing_ok=True)
            continue
        if not _alive(pid):
            state.unlink(missing_ok=True)
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + DOWN_TIMEOUT
        while _alive(pid) and state.exists() and time.monotonic() < deadline:
            time.sleep(HEALTH_INTERVAL / 5)
        while _alive(pid) and time.monotonic() < deadline:  # its state file goes first, then it exits
            time.sleep(HEALTH_INTERVAL / 5)
        if _alive(pid):
            say(f"mcpbench: lab {pid} ({info.get('url')}) did not stop within {DOWN_TIMEOUT:g} s")
            status = 1
        else:
            say(f"mcpbench: lab {pid} ({info.get('url')}) stopped")
    return status
