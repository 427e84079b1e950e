"""Bad input at the command line: one line naming what is wrong, a non-zero exit, no traceback."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from mcpbench.cli import main

MCPBENCH = [sys.executable, "-m", "mcpbench"]


@pytest.mark.parametrize(
    "content,where",
    [(b'{"v":1,"ts":1,"kind":"trace"}\n{oops\n{"v":1,"ts":2,"kind":"x"}\n', ":2: not JSON"), (b"", "empty trace")],
)
def test_inspect_malformed_trace(tmp_path, content, where):
    trace = tmp_path / "bad.jsonl"
    trace.write_bytes(content)
    result = CliRunner().invoke(main, ["inspect", str(trace)])
    assert result.exit_code == 2
    assert result.output.strip() == result.output.strip().splitlines()[0]  # one line
    assert str(trace) in result.output and where in result.output


def test_inspect_missing_file(tmp_path):
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2 and "cannot read trace" in result.output


def test_inspect_reports_torn_tail(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b'{"v":1,"ts":1,"kind":"trace","session":null}\n{"v":1,"ts":2,"kind":"mess')
    result = CliRunner().invoke(main, ["inspect", str(trace)])
    assert result.exit_code == 0 and "torn last line skipped" in result.output


def test_unknown_transport_and_missing_command():
    proc = subprocess.run(MCPBENCH + ["lab", "serve", "--transport", "carrier-pigeon"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "carrier-pigeon" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(MCPBENCH + ["tee"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_tee_with_server_that_dies_at_start(tmp_path):
    proc = subprocess.run(
        MCPBENCH + ["tee", "--out", str(tmp_path / "t.jsonl"), "--", sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(1)"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    assert "boom" in proc.stderr and "exited with status 1" in proc.stderr.splitlines()[-1]
