"""The live view in a real terminal (tmux) while a recorder writes: `inspect --follow`, `tee --live`, `record --live`."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mcpbench.lab.peers.drive import drive
from tests.record.helpers import record_proxy
from tests.support.servers import REPO_ROOT, serve_argv
from tests.support.terminal import needs_tmux, terminal

pytestmark = needs_tmux
MCPBENCH = [sys.executable, "-m", "mcpbench"]


def methods_row(screen: str, name: str) -> list[str]:
    """The cells of a method's row in the methods panel (the left half of the screen)."""
    for line in screen.splitlines():
        cells = line[:80].strip("│ ").split()
        if " ".join(cells[: len(name.split())]) == name:
            return cells[len(name.split()) :]
    return []


def title(screen: str) -> str:
    return screen.splitlines()[0]


def log_lines(screen: str) -> list[str]:
    """The event log's lines (the panel whose rows start with a time)."""
    return [line.strip("│ ") for line in screen.splitlines() if re.match(r"│\d\d:\d\d:\d\d\.\d{3} ", line)]


@pytest.mark.slow
def test_follow_a_recording_keys_filter_and_pause_q_leaves(tmp_path: Path, http_server) -> None:
    trace = tmp_path / "http.jsonl"
    with record_proxy(http_server.url, trace) as (url, _), terminal(tmp_path, [*MCPBENCH, "inspect", "--follow", str(trace)]) as term:
        term.wait_for("following")
        drive(url, "legacy")

        # The checks read the session once closed (the client's DELETE, after its last call): the view
        # draws as the trace grows, and a frame may show `echo` answered and `fail`, the next call, not yet.
        screen = term.wait_for(lambda s: re.search(r"│ \w{12} +streamable-http .* closed ", s) is not None)
        assert methods_row(screen, "tools/call echo")[:2] == ["1", "0"]
        assert methods_row(screen, "tools/call fail")[:2] == ["1", "1"]  # count, errors
        assert "streamable-http" in screen and "2025-11-25 (handshake)" in screen, screen
        assert "tool-error" in screen  # the violations and errors panel
        # The log stays at the newest rows, where `echo` (an early call) is no longer: Home shows the oldest.
        term.keys("Home")
        term.wait_for(lambda s: any("→ tools/call echo #" in line for line in log_lines(s)))

        def shows(filter_: str, line_test) -> str:
            """The screen once the title names `filter_` and every log line passes `line_test`."""
            return term.wait_for(lambda s: filter_ in title(s) and bool(log_lines(s)) and all(map(line_test, log_lines(s))))

        term.keys("d")  # client → server only
        shows("filter: dir=c2s", lambda line: " → " in line)
        term.keys("d")
        shows("filter: dir=s2c", lambda line: " ← " in line)
        term.keys("a", "m")  # the first method of the stats
        shows("filter: method=initialize", lambda line: "initialize #" in line)
        term.keys("a", "s")
        screen = term.wait_for(lambda s: "filter: session=" in title(s))
        session = title(screen).split("filter: session=")[1].split()[0]
        shows(f"filter: session={session}", lambda line: f" {session[:12]} " in line)
        term.keys("a")
        term.wait_for(lambda s: "filter:" not in title(s) and any(" ← " in line for line in log_lines(s)))

        term.keys("p")  # paused: the panels stay as they were while the trace is read on
        term.wait_for("PAUSED (0 new events)")
        drive(url, "legacy")
        screen = term.wait_for(lambda s: re.search(r"PAUSED \([1-9]\d* new events\)", title(s)) is not None)
        assert methods_row(screen, "tools/call echo")[0] == "1"
        term.keys("p")
        term.wait_for(lambda s: methods_row(s, "tools/call echo")[:1] == ["2"] and "PAUSED" not in title(s))

        term.keys("q")
        assert term.status() == 0
        assert term.restored()
        term.wait_for("SHELL-AGAIN")


def test_ctrl_c_leaves_with_130_and_the_terminal_restored(tmp_path: Path, recordings) -> None:
    with terminal(tmp_path, [*MCPBENCH, "inspect", "--follow", str(recordings["legacy"])]) as term:
        term.wait_for(lambda s: methods_row(s, "tools/call echo")[:1] == ["1"])
        term.keys("C-c")
        assert term.status() == 130
        assert term.restored()


@pytest.mark.slow
def test_tee_live_shows_calls_in_flight_then_waits_for_q(tmp_path: Path) -> None:
    trace, fifo, answers = tmp_path / "tee.jsonl", tmp_path / "in.fifo", tmp_path / "out.txt"
    os.mkfifo(fifo)
    argv = ["sh", "-c", f'exec "$@" < {fifo} > {answers}', "tee-live", *MCPBENCH, "tee", "--live", "--out", str(trace), "--", *serve_argv("stdio")]
    with terminal(tmp_path, argv) as term:
        with open(fifo, "w") as client:  # the session's client: this test, line by line
            client.write('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},'
                         '"clientInfo":{"name":"t","version":"1"}}}\n')
            client.flush()
            term.wait_for(lambda s: methods_row(s, "initialize")[:1] == ["1"])
            client.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
                         '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"seconds":2,"steps":2}}}\n')
            client.flush()
            screen = term.wait_for("in flight (1)")
            assert "tools/call slow" in screen and "operating" in screen
            term.wait_for(lambda s: methods_row(s, "tools/call slow")[:1] == ["1"] and "in flight (0)" in s)
        # The client is gone: the server ends, the view says so and stays until it is left.
        screen = term.wait_for("the recording is complete")
        assert "closed" in screen and not term.status_file.exists()
        term.keys("q")
        assert term.status() == 0
        assert term.restored()
    assert '"id":2' in answers.read_text()  # the session went through the tee untouched


@pytest.mark.slow
def test_record_live_shows_sessions_as_they_come(tmp_path: Path, http_server) -> None:
    trace = tmp_path / "rec.jsonl"
    url_file = tmp_path / "url"
    argv = ["sh", "-c", f'exec "$@" > {url_file}', "record-live", *MCPBENCH, "record", "--live", "--upstream", http_server.url,
            "--listen", "127.0.0.1:0", "--out", str(trace)]
    with terminal(tmp_path, argv) as term:
        term.wait_for("following")
        url = url_file.read_text().strip()
        drive(url, "auto")
        screen = term.wait_for(lambda s: methods_row(s, "tools/call echo")[:1] == ["1"])
        assert "2026-07-28" in screen and "streamable-http" in screen
        term.keys("C-c")  # a Ctrl-C to the job: the view, and the recording with it
        assert term.status() == 130
        assert term.restored()
    assert subprocess.run([*MCPBENCH, "inspect", str(trace)], capture_output=True, cwd=REPO_ROOT, timeout=60).returncode == 0


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_a_compressed_trace_is_shown_whole(tmp_path: Path) -> None:
    from tests.support.recordings import record

    trace = record(tmp_path / "s.jsonl.gz", "legacy")
    with terminal(tmp_path, [*MCPBENCH, "inspect", "--follow", str(trace)]) as term:
        screen = term.wait_for("compressed: shown whole, not followed")
        screen = term.wait_for(lambda s: methods_row(s, "tools/call echo")[:1] == ["1"])
        assert "closed" in screen
        term.keys("q")
        assert term.status() == 0


def test_a_terminal_too_small_is_one_line_and_exit_3(tmp_path: Path, recordings) -> None:
    with terminal(tmp_path, [*MCPBENCH, "inspect", "--follow", str(recordings["legacy"])], width=60, height=15) as term:
        assert term.status() == 3
        screen = term.wait_for("SHELL-AGAIN")
        lines = [line for line in screen.splitlines() if line.strip()]
        assert lines[0].startswith("mcpbench: the terminal is 60x15; the live view needs at least 80x24")
        assert lines[1:] == ["SHELL-AGAIN"]  # one line, no traceback
