"""A stdio server that goes away mid-replay: the session is aborted with how the process ended."""

import sys

from mcpbench.protocol.transports import STDIO
from mcpbench.replay import plan as plans
from mcpbench.replay.engine import Replayer
from mcpbench.system.target import Target
from tests.support.traces import handshake, header, write_trace

# Reads the client's first line (initialize), then ends as ARGV says.
GOES = "import os, signal, sys; sys.stdin.readline(); {}"


def aborted(tmp_path, ending: str) -> str | None:
    trace = write_trace(tmp_path / "t.jsonl", handshake(), header=header())
    server = Target(STDIO, argv=(sys.executable, "-c", GOES.format(ending)))
    (session,) = Replayer(server, timeout=10.0).run(plans.load(trace)).sessions
    return session.aborted


def test_a_server_killed_by_a_signal_is_named_by_it(tmp_path):
    assert aborted(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)") == "the server process was killed by SIGKILL"


def test_a_server_that_exits_gives_its_status(tmp_path):
    assert aborted(tmp_path, "sys.exit(3)") == "the server process exited with status 3"
