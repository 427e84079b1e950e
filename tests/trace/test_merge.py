"""Several traces into one (trace/merge.py): every event kept, in order, each with its own session and
transport; HTTP events compacted anew and read back complete."""

from pathlib import Path

import pytest

from mcpbench.protocol.errors import TraceError
from mcpbench.replay import plan as plans
from mcpbench.trace.format import Kind
from mcpbench.trace.merge import merge_traces
from mcpbench.trace.reader import TraceReader

DATA = Path(__file__).with_name("data")
HTTP = DATA / "v2-http-sse-answers.jsonl"

# Fields every writer fills in itself: the merged trace's header has its own.
OWN = ("v", "ts", "mcpbench", "started")


def events(path: Path) -> list[dict]:
    return [{k: v for k, v in event.items() if k != "v"} for event in TraceReader(path) if event["kind"] != Kind.TRACE]


def test_a_stdio_and_an_http_trace_merged_read_back_event_for_event(tmp_path, recordings):
    out = merge_traces([recordings["legacy"], HTTP], tmp_path / "merged.jsonl")
    assert events(out) == events(recordings["legacy"]) + events(HTTP)
    header = TraceReader(out)
    next(iter(header))
    first = next(iter(TraceReader(recordings["legacy"])))
    assert {k: v for k, v in header.header.items() if k not in OWN} == {k: v for k, v in first.items() if k not in OWN}


def test_merging_into_one_of_the_sources_appends_its_sessions(tmp_path, recordings):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(recordings["legacy"].read_bytes())
    before = plans.load(trace)
    merge_traces([trace, recordings["auto"]], trace)
    after = plans.load(trace)
    assert [s.id for s in after.sessions] == [s.id for s in before.sessions] + [s.id for s in plans.load(recordings["auto"]).sessions]
    assert not list(tmp_path.glob(".*merging"))  # written beside, renamed into place


def test_an_unreadable_source_leaves_the_target_as_it_was(tmp_path, recordings):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(recordings["legacy"].read_bytes())
    (tmp_path / "bad.jsonl").write_text("not a trace\n")
    with pytest.raises(TraceError, match="bad.jsonl:1"):
        merge_traces([trace, tmp_path / "bad.jsonl"], trace)
    assert trace.read_bytes() == recordings["legacy"].read_bytes()
    assert not list(tmp_path.glob(".*merging"))
