"""The trace the addon's hooks write for a scripted recording (`tests/record/scripted.py`), byte for byte.

The golden files were written by the recorder before it was split into parts (issue 23): any change
of a trace byte, an event's order or its time shows here.
"""

from pathlib import Path

import orjson
import pytest

from tests.record.scripted import RUNS, record

GOLDEN = Path(__file__).with_name("scripted")


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_scripted_recording_writes_the_golden_trace(tmp_path: Path, name: str) -> None:
    written = record(tmp_path / name, RUNS[name]).read_bytes().splitlines(keepends=True)
    golden = (GOLDEN / name).read_bytes().splitlines(keepends=True)
    assert len(written) == len(golden) > 100
    assert _versionless(written.pop(0)) == _versionless(golden.pop(0))
    for number, (line, expected) in enumerate(zip(written, golden), 1):
        assert line == expected, f"line {number + 1}"


def _versionless(header: bytes) -> dict:
    """The header line without the versions of mcpbench and mitmproxy, which change on their own."""
    fields = orjson.loads(header)
    assert fields.pop("mcpbench") and fields.pop("mitmproxy")
    return fields
