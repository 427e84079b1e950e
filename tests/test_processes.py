"""The process toolkit (mcpbench/system/processes.py): start with the stop signals held, stop gracefully then kill, free ports."""

import os
import signal
import socket
import subprocess
import contextlib
import sys
import threading

import pytest

from mcpbench.system.processes import dying_with_parent, entered_side_by_side, free_port, start, stop_process, stops_held

# A child that says it is ready, then ignores SIGTERM (and optionally SIGINT) and sleeps.
STUBBORN = (
    "import signal, sys, time\n"
    "for name in sys.argv[1:]:\n"
    "    signal.signal(getattr(signal, name), signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)
WAIT = 10.0


def stubborn(*ignored: str) -> subprocess.Popen:
    proc = start([sys.executable, "-c", STUBBORN, *ignored], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"  # its handlers are set
    return proc


def test_a_child_that_stops_on_sigterm_is_reaped_with_its_status():
    proc = stubborn()
    assert stop_process(proc, WAIT) == -signal.SIGTERM
    assert proc.returncode == -signal.SIGTERM


def test_a_child_that_ignores_the_signal_is_killed_after_the_grace():
    proc = stubborn("SIGTERM")
    assert stop_process(proc, 0.2) == -signal.SIGKILL


def test_the_signals_are_sent_in_turn_until_one_works():
    proc = stubborn("SIGINT")
    # The ignored SIGINT's grace always runs out: a short one (SIGTERM's default action ends it at once).
    assert stop_process(proc, 1.0, signals=(signal.SIGINT, signal.SIGTERM)) == -signal.SIGTERM


def test_no_signals_gives_a_child_asked_otherwise_its_grace():
    proc = start([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    proc.stdin.close()  # asked to stop: its stdin ended
    assert stop_process(proc, WAIT, signals=()) == 0


def test_a_child_already_gone_is_only_reaped():
    proc = start([sys.executable, "-c", "raise SystemExit(7)"])
    proc.wait(WAIT)
    assert stop_process(proc, WAIT) == 7


def test_communicate_reads_the_pipes_while_the_child_stops():
    # On SIGTERM it writes more than a pipe holds: read on, it exits; not read, it would block until killed.
    code = (
        "import signal, sys, time\n"
        "def bye(*_):\n"
        "    sys.stdout.write('x' * 1_000_000); sys.stdout.flush(); sys.exit(3)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = start([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    assert stop_process(proc, WAIT, communicate=True) == 3


def test_a_stop_signal_while_held_arrives_after_the_block():
    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        with stops_held():
            os.kill(os.getpid(), signal.SIGTERM)
            assert got == []  # held
        assert got == [signal.SIGTERM]  # delivered to the handler set before
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_stop_during_start_stops_the_child_the_caller_never_got():
    class Stopped(Exception):
        pass

    def stop(signum, frame):
        raise Stopped

    marker = "mcpbench-processes-test-%d" % os.getpid()
    previous = signal.signal(signal.SIGTERM, stop)
    real_popen = subprocess.Popen
    started: list[subprocess.Popen] = []

    def popen_then_signal(*args, **kwargs):  # the signal lands between the fork and start's return
        proc = real_popen(*args, **kwargs)
        started.append(proc)
        os.kill(os.getpid(), signal.SIGTERM)
        return proc

    try:
        subprocess.Popen = popen_then_signal
        with pytest.raises(Stopped):
            start([sys.executable, "-c", "import time; time.sleep(60)", marker])
    finally:
        subprocess.Popen = real_popen
        signal.signal(signal.SIGTERM, previous)
    (proc,) = started
    assert proc.returncode == -signal.SIGTERM  # stopped and reaped by start


def test_free_port_gives_a_port_that_can_be_bound():
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_a_child_dying_with_its_parent_starts_as_asked():
    proc = start(dying_with_parent([sys.executable, "-c", "print('hello')"]), stdout=subprocess.PIPE, text=True)
    assert proc.communicate(timeout=WAIT) == ("hello\n", None) and proc.returncode == 0


def test_side_by_side_enters_all_at_once_and_leaves_only_those_that_entered():
    together = threading.Barrier(3, timeout=WAIT)  # passes only when the three enter at the same time
    log = []

    @contextlib.contextmanager
    def part(name):
        together.wait()
        if name == "b":
            raise OSError("b did not start")
        log.append(f"enter {name}")
        try:
            yield name
        finally:
            log.append(f"exit {name}")

    with contextlib.ExitStack() as stack:
        assert entered_side_by_side(stack, [part("a"), part("c"), part("d")]) == ["a", "c", "d"]
        assert sorted(log) == ["enter a", "enter c", "enter d"]
    assert log[3:] == ["exit d", "exit c", "exit a"]  # left in reverse, as a stack leaves

    log.clear()
    together.reset()
    with pytest.raises(OSError, match="b did not start"):
        with contextlib.ExitStack() as stack:
            entered_side_by_side(stack, [part("a"), part("b"), part("c")])
    assert sorted(log) == ["enter a", "enter c", "exit a", "exit c"]  # b never entered: never left
