"""Watching processes a test did not start itself (Linux /proc, pidfd): every wait is bounded."""

import contextlib
import os
import queue
import select
import subprocess
import threading
from pathlib import Path

import pytest


def children(pid: int) -> list[int]:
    """The child processes of `pid`, whichever of its threads started them (Linux /proc).

    Read from every process's parent id, not from `/proc/PID/task/*/children`: the kernel says that
    file is reliable only while the children are stopped, and a child whose starting thread ended
    moves to another thread's list as it is read (a child seen by neither, once in CI).
    """
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):  # a process that just ended
            stat = (entry / "stat").read_text()
            # after the command's name, which may hold spaces or parentheses: state, then the parent's id
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                found.append(int(entry.name))
    return sorted(found)


def forked_children(pid: int) -> list[int]:
    """The children of `pid` that run its own command line (the tee's forked recorder, not its server)."""
    ours = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [child for child in children(pid) if Path(f"/proc/{child}/cmdline").read_bytes() == ours]


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (Linux /proc)."""
    out: list[int] = []
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for child in map(int, children):
        out += [child, *descendants(child)]
    return out


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for_exit(pid: int, timeout: float) -> None:
    """Wait, bounded, for a process that is not our child to exit."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"process {pid} still running after {timeout} s"
    finally:
        os.close(fd)


def wait_for_lines(proc: subprocess.Popen, count: int, timeout: float) -> list[str]:
    """The first `count` lines of `proc`'s stdout (text mode), each awaited at most `timeout` seconds."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    got: list[str] = []
    while len(got) < count:
        try:
            got.append(lines.get(timeout=timeout).rstrip("\n"))
        except queue.Empty:
            pytest.fail(f"the process printed {got} within {timeout:g} s; stderr: {proc.stderr.read() if proc.poll() is not None else ''}")
    return got
