"""TraceReader across read and batch boundaries: same events, right line numbers, torn tail."""

import pytest

from mcpbench.protocol.errors import TraceError
from mcpbench.trace import reader as reader_module
from mcpbench.trace.reader import TraceReader
from tests.support.traces import event, header, lines

HEADER = header()


def stderr(i: int, size: int) -> dict:
    return event(2.0 + i, "s", "c2s", kind="stderr", text="x" * size)


@pytest.fixture
def small_reads(monkeypatch):
    """Reads and batches far smaller than the lines, so every boundary case occurs."""
    monkeypatch.setattr(reader_module, "READ_BYTES", 64)
    monkeypatch.setattr(reader_module, "BATCH_BYTES", 150)


def write(path, events, tail=b""):
    path.write_bytes(lines(*events) + tail)
    return path


@pytest.mark.parametrize("reads", ["small", "default"])
def test_events_come_back_whole_and_in_order(tmp_path, request, reads):
    if reads == "small":
        request.getfixturevalue("small_reads")
    events = [HEADER] + [stderr(i, size) for i, size in enumerate([0, 5, 300, 1, 64, 1000, 2, 140])]
    reader = TraceReader(write(tmp_path / "t.jsonl", events))
    assert list(reader) == events
    assert reader.lines == len(events) and reader.torn is None


def test_a_bad_line_in_a_later_batch_is_named(tmp_path, small_reads):
    path = write(tmp_path / "t.jsonl", [HEADER] + [stderr(i, 50) for i in range(6)], b"{oops\n")
    with pytest.raises(TraceError, match=r"t\.jsonl:8: not JSON"):
        list(TraceReader(path))


def test_a_torn_line_longer_than_a_read_is_skipped_and_reported(tmp_path, small_reads):
    events = [HEADER, stderr(0, 10)]
    reader = TraceReader(write(tmp_path / "t.jsonl", events, b'{"v":1,"ts":3.0,"kind":"stderr","text":"' + b"y" * 500))
    assert list(reader) == events
    assert reader.torn and ":3: torn last line" in reader.torn
