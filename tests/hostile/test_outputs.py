"""Outputs never destroy inputs: an output path that names an input (or another output) is refused
with one line and exit 2 before anything is written, and whole-file outputs appear whole or not at all.
"""

import os
import stat
import sys
from pathlib import Path

import orjson
import pytest

from mcpbench.files.outputs import atomic_path, write_atomic
from tests.hostile.helpers import EXIT_INPUT, EXIT_OK, assert_clean_failure, run
from tests.support.traces import event, header, lines, sent, write_trace

HTTP = event(2.0, None, None, kind="http", transport="streamable-http", flow="f1", conn="conn-1", mcp=False, method="GET",
             url="http://127.0.0.1:1/", path="/", http_version="HTTP/1.1", request_headers={}, request_size=0, started=1.5,
             status=200, reason="OK", content_type="text/plain", response_headers={}, response_size=2, body="hi")
TRACE_BYTES = lines(header("streamable-http", recorder="mitmproxy"), HTTP)
# Refusals come before the target is touched: this one is never started.
TARGET = f"stdio:{sys.executable} -c pass"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "rec.jsonl"
    path.write_bytes(TRACE_BYTES)
    return path


def assert_untouched(trace: Path) -> None:
    assert trace.read_bytes() == TRACE_BYTES
    assert not [p.name for p in trace.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "args, option",
    [
        (["--out", "{trace}"], "--out"),
        (["--report", "{trace}"], "--report"),
        (["--learn-noise", "--noise-file", "{trace}"], "--noise-file"),
        (["--out", "{dir}/./rec.jsonl"], "--out"),  # another spelling of the same file
    ],
    ids=["out", "report", "noise-file", "respelled"],
)
def test_replay_refuses_to_write_onto_its_recording(trace: Path, args: list[str], option: str) -> None:
    args = [a.format(trace=trace, dir=trace.parent) for a in args]
    result = run(["replay", str(trace), "--target", TARGET, *args])
    assert_clean_failure(result, EXIT_INPUT, option, "the trace being replayed", "choose another path")
    assert_untouched(trace)


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_replay_refuses_a_link_to_its_recording(trace: Path, link: str) -> None:
    alias = trace.with_name("alias.jsonl")
    (os.symlink if link == "symlink" else os.link)(trace, alias)
    result = run(["replay", str(trace), "--target", TARGET, "--out", str(alias)])
    assert_clean_failure(result, EXIT_INPUT, "--out", str(alias))
    assert_untouched(trace)


def test_replay_refuses_two_outputs_on_one_file(trace: Path) -> None:
    both = trace.with_name("both.json")
    result = run(["replay", str(trace), "--target", TARGET, "--out", str(both), "--report", str(both)])
    assert_clean_failure(result, EXIT_INPUT, "--report", "--out")
    assert not both.exists()


def test_replay_refuses_a_report_onto_an_ignore_file(trace: Path) -> None:
    rules = trace.with_name("rules.txt")
    rules.write_text("result.id\n")
    result = run(["replay", str(trace), "--target", TARGET, "--ignore-file", str(rules), "--report", str(rules)])
    assert_clean_failure(result, EXIT_INPUT, "--report", "--ignore-file")
    assert rules.read_text() == "result.id\n"


def test_diff_refuses_a_report_onto_a_trace(trace: Path) -> None:
    other = trace.with_name("other.jsonl")
    other.write_bytes(TRACE_BYTES)
    result = run(["diff", str(trace), str(other), "--report", str(other)])
    assert_clean_failure(result, EXIT_INPUT, "--report", "TRACE_B")
    assert other.read_bytes() == TRACE_BYTES


def test_export_refuses_to_write_onto_the_trace(trace: Path) -> None:
    result = run(["export", "--har", str(trace), "--out", str(trace)])
    assert_clean_failure(result, EXIT_INPUT, "--out", "the trace being exported")
    assert_untouched(trace)


def test_export_replaces_an_existing_file_whole_and_follows_a_symlink(trace: Path) -> None:
    real = trace.with_name("real.har")
    real.write_text("old")
    link = trace.with_name("link.har")
    link.symlink_to(real)
    result = run(["export", "--har", str(trace), "--out", str(link)])
    assert result.returncode == EXIT_OK and result.stderr == "", result.stderr
    assert link.is_symlink()  # the link stays, its target gets the HAR
    assert orjson.loads(real.read_bytes())["log"]["entries"][0]["response"]["content"]["text"] == "hi"
    assert_untouched(trace)


def test_tee_refuses_to_record_onto_a_file_its_server_reads(trace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    server = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()", f"--trace={trace}"]
    result = run(["tee", "--out", str(trace), "--", *server])
    assert_clean_failure(result, EXIT_INPUT, "--out", "a file the server command names")
    assert_untouched(trace)
    assert not marker.exists()  # refused before the server started


def test_a_failed_whole_file_write_leaves_the_old_file(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text("good")
    with pytest.raises(RuntimeError), atomic_path(report) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the writer died")
    assert report.read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary file left
    write_atomic(report, b"new")
    assert report.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_a_whole_file_write_onto_a_device_writes_in_place() -> None:
    write_atomic("/dev/null", b"discarded")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)  # never replaced by a regular file


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.parametrize("command", ["tee", "record", "replay"])
def test_a_trace_is_never_written_over_a_file_that_is_not_one(trace: Path, tmp_path: Path, command: str) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n")
    write_trace(trace, [sent(2.0, 1, "tools/list", session="s")], header=header(recorder="mitmproxy"))
    args = {
        "tee": ["tee", "--out", str(notes), "--", sys.executable, "-c", "pass"],
        "record": ["record", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:0", "--out", str(notes)],
        "replay": ["replay", str(trace), "--target", TARGET, "--out", str(notes)],
    }[command]
    default = tmp_path / "default-traces"  # where a recorder puts a trace it was given no path for
    result = run(args, env={"MCPBENCH_TRACE_DIR": str(default)})
    kept = [line for line in result.stderr.splitlines() if not line.startswith(("mcpbench: recording ", "mcpbench: warning: "))]
    result.stderr = "\n".join(kept)
    assert_clean_failure(result, EXIT_INPUT, str(notes), "is not a trace")
    assert notes.read_text() == "# my notes\n"
    assert not default.exists()  # and no stray trace elsewhere instead


def test_a_new_recording_adds_its_session_to_an_earlier_trace(tmp_path: Path) -> None:
    # A host gives every server process it starts the same --out (issue 39): a tee never knows a rerun
    # from the host's next session, and replacing lost the earlier sessions' traffic.
    out = tmp_path / "t.jsonl"
    out.write_bytes(TRACE_BYTES)  # an earlier recording, at the path a host's config always gives
    result = run(["tee", "--out", str(out), "--", sys.executable, "-c", "pass"])
    assert result.returncode == EXIT_OK and "Traceback" not in result.stderr
    kinds = [orjson.loads(line)["kind"] for line in out.read_bytes().splitlines()]
    assert kinds == ["trace", "http", "process", "process"]
    assert out.read_bytes().startswith(TRACE_BYTES)  # what was there is kept byte for byte


@pytest.mark.parametrize("out", ["/dev/stdout", "redirected"])
def test_tee_refuses_to_record_into_the_session_stream(tmp_path: Path, out: str) -> None:
    import subprocess

    from tests.hostile.helpers import MCPBENCH, assert_no_traceback
    from tests.support.servers import REPO_ROOT

    target = tmp_path / "stream.out"
    path = "/dev/stdout" if out == "/dev/stdout" else str(target)  # `> stream.out` with --out stream.out
    with target.open("wb") as stdout:
        proc = subprocess.run([*MCPBENCH, "tee", "--out", path, "--", sys.executable, "-c", "print('served')"],
                              input=b"{}\n", stdout=stdout, stderr=subprocess.PIPE, cwd=REPO_ROOT, timeout=60)
    assert_no_traceback(proc.stderr.decode())
    result = subprocess.CompletedProcess(proc.args, proc.returncode, "", proc.stderr.decode())
    assert_clean_failure(result, EXIT_INPUT, path, "the session's stdout")
    assert target.read_bytes() == b""  # neither a trace nor the server's output went into the stream
