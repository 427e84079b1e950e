"""Compressed traces (`.jsonl.gz`, `.jsonl.zst`): written by the tee and `mcpbench record`, read by every command.

Flushed at every write, so a file cut anywhere reads up to its last complete line, with a note.
"""

import gzip
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from mcpbench.cli import main
from mcpbench.lab.peers.drive import drive
from mcpbench.trace import Kind, TraceReader, TraceWriter
from mcpbench.trace.compress import _zstd
from tests.record.helpers import record_command
from tests.support.servers import serve_argv, stdio_params

TEE = [sys.executable, "-m", "mcpbench", "tee"]
SUFFIXES = [".jsonl.gz"] + ([".jsonl.zst"] if _zstd() is not None else [])
WAIT = 60.0


def write(path: Path, count: int) -> list[dict]:
    with TraceWriter(path, transport="stdio", header={"command": ["srv"]}) as writer:
        for number in range(count):
            writer.message("s1", "c2s", b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"}}' % number, 2.0 + number)
            writer.write({"session": "s1", "dir": "s2c", "kind": Kind.STDERR, "text": f"log {number}"})
    return list(TraceReader(path))


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_compressed_trace_reads_as_the_plain_one(tmp_path: Path, suffix: str) -> None:
    plain = write(tmp_path / "t.jsonl", 200)
    packed = tmp_path / f"t{suffix}"
    events = write(packed, 200)
    assert [e | {"ts": 0} for e in events[1:]] == [e | {"ts": 0} for e in plain[1:]]
    assert packed.stat().st_size * 4 < (tmp_path / "t.jsonl").stat().st_size
    if suffix.endswith(".gz"):  # a whole, ordinary gzip file once closed
        assert gzip.decompress(packed.read_bytes()).count(b"\n") == len(events)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_cut_compressed_trace_reads_up_to_its_last_complete_line(tmp_path: Path, suffix: str) -> None:
    packed = tmp_path / f"t{suffix}"
    events = write(packed, 40)
    data = packed.read_bytes()
    cut = tmp_path / f"cut{suffix}"
    seen = set()
    for size in range(len(data) - 1, len(data) // 2, -7):  # cut anywhere in the second half
        cut.write_bytes(data[:size])
        reader = TraceReader(cut)
        got = list(reader)
        assert got == events[: len(got)] and len(got) > len(events) // 3
        assert reader.torn and ("stops short" in reader.torn or "torn last line" in reader.torn), reader.torn
        seen.add(len(got))
    assert len(seen) > 10  # the cuts fell in many different lines


def test_a_killed_writer_leaves_every_complete_event_readable(tmp_path: Path) -> None:
    """No close: the stream is never ended, every event written is still there."""
    path = tmp_path / "t.jsonl.gz"
    script = (
        "import os, sys\nfrom mcpbench.trace import TraceWriter, Kind\n"
        f"w = TraceWriter({str(path)!r}, transport='stdio')\n"
        "for n in range(500): w.write({'session': 's', 'dir': 's2c', 'kind': Kind.STDERR, 'text': str(n)})\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], timeout=WAIT)
    assert proc.returncode == -signal.SIGKILL
    reader = TraceReader(path)
    assert [e["text"] for e in list(reader)[1:]] == [str(n) for n in range(500)]
    assert "stops short" in reader.torn
    result = CliRunner().invoke(main, ["inspect", str(path)])
    assert result.exit_code == 0 and "stops short" in result.output


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_the_tee_writes_a_compressed_trace_that_inspect_and_diff_read(tmp_path: Path) -> None:
    plain, packed = tmp_path / "t.jsonl", tmp_path / "t.jsonl.gz"
    for out in (plain, packed):
        drive(stdio_params(TEE + ["--out", str(out), "--"] + serve_argv("stdio")), "legacy")
    assert gzip.decompress(packed.read_bytes()).count(b"\n") == sum(1 for _ in TraceReader(packed))
    summaries = []
    for out in (plain, packed):
        result = CliRunner().invoke(main, ["inspect", "--json", str(out)])
        assert result.exit_code == 0, result.output
        summaries.append(orjson.loads(result.stdout))
    assert summaries[0]["methods"].keys() == summaries[1]["methods"].keys()
    assert summaries[1]["methods"]["tools/call echo"]["outcomes"] == {"ok": 1}
    result = CliRunner().invoke(main, ["diff", str(plain), str(packed)])
    assert result.exit_code == 0, result.output


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_record_writes_a_compressed_trace_that_inspect_and_export_read(tmp_path: Path, http_server) -> None:
    out = tmp_path / "t.jsonl.gz"
    with record_command(http_server.url, out) as (proc, url):
        drive(url, "legacy")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130  # 128 + SIGINT: stopped as asked, the trace complete
    assert gzip.decompress(out.read_bytes())  # ended properly
    events = list(TraceReader(out))
    assert any(e["kind"] == "message" and e["msg"].get("method") == "tools/call" for e in events)
    result = CliRunner().invoke(main, ["inspect", "--json", str(out)])
    assert result.exit_code == 0 and orjson.loads(result.stdout)["methods"]["tools/call echo"]["outcomes"] == {"ok": 1}
    result = CliRunner().invoke(main, ["export", "--har", str(out)])
    assert result.exit_code == 0 and len(orjson.loads(result.stdout_bytes)["log"]["entries"]) == sum(e["kind"] == "http" for e in events)
