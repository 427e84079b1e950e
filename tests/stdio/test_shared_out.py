"""Tees that share an `--out` (a host starting the server once per session) each add their sessions
to it, one after another and at the same time; `trace merge` and `trace finish` (issue 39)."""

import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from mcpbench.cli import main
from mcpbench.trace import shared
from tests.support.peers import strict_argv
from tests.support.per_session import WAIT, echo_session
from tests.support.servers import REPO_ROOT

MCPBENCH = [sys.executable, "-m", "mcpbench"]


def tee(out: Path) -> list[str]:
    return [*MCPBENCH, "tee", "--out", str(out), "--", *strict_argv("stdio")]


def inspected(trace: Path) -> dict:
    proc = subprocess.run([*MCPBENCH, "inspect", "--strict", "--json", str(trace)], cwd=REPO_ROOT,
                          capture_output=True, timeout=WAIT)
    assert proc.returncode == 0, proc.stderr.decode()  # --strict: exit 1 on any violation
    return orjson.loads(proc.stdout)


@pytest.mark.slow
def test_tees_sharing_an_out_keep_every_session_one_after_another_and_at_once(tmp_path):
    out = tmp_path / "shared.jsonl"
    # Before: each tee replaced the trace (only the last session was left); two at once left
    # violations and the second exited 3 with a traceback from its recorder over the shared spool.
    assert [echo_session(tee(out), f"seq-{i}") for i in range(3)] == ["seq-0", "seq-1", "seq-2"]
    answers: dict[str, str] = {}

    def client(name: str) -> None:
        for i in range(2):
            answers[f"{name}-{i}"] = echo_session(tee(out), f"{name}-{i}")

    threads = [threading.Thread(target=client, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(4 * WAIT)
    assert answers == {key: key for key in ("a-0", "a-1", "b-0", "b-1")}
    report = inspected(out)
    assert len(report["sessions"]) == 7 and all(s["violations"] == 0 and s["requests"] == 2 for s in report["sessions"])
    assert not shared.parts(out)  # every part was added and removed
    # A mock served from it answers every client: each session's call as recorded.
    mock = [*MCPBENCH, "serve-trace", str(out)]
    texts = ["seq-0", "seq-2", "a-1", "b-0"]
    assert [echo_session(mock, text) for text in texts] == texts


def test_trace_finish_adds_a_part_a_killed_tee_left_and_merge_makes_one_trace(tmp_path, recordings):
    out = tmp_path / "t.jsonl"
    out.write_bytes(recordings["legacy"].read_bytes())
    part = shared.part_path(out, "0123abcd")  # a concurrent tee killed after its recorder wrote it whole
    part.write_bytes(recordings["auto"].read_bytes())
    runner = CliRunner()
    pending = runner.invoke(main, ["inspect", str(out)])  # not yet added: the trace says so
    assert pending.exit_code == 0 and "1 session part(s) beside it not added yet" in pending.output, pending.output
    result = runner.invoke(main, ["trace", "finish", str(out)])
    assert result.exit_code == 0 and f"added the sessions of {part.name}" in result.output, result.output
    assert not part.exists()
    both = {s["id"] for s in inspected(out)["sessions"]}
    merged = tmp_path / "merged.jsonl"
    result = runner.invoke(main, ["trace", "merge", str(recordings["legacy"]), str(recordings["auto"]), "--out", str(merged)])
    assert result.exit_code == 0, result.output
    assert {s["id"] for s in inspected(merged)["sessions"]} == both and len(both) == 2
