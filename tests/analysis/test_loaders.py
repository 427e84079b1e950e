import json

import pandas as pd
import pytest

from mcpbench.analysis import load_lab, load_replay, load_run, load_samples, load_trace
from mcpbench.analysis.results import ResultsError
from mcpbench.analysis.tables import latency_table, outcome_table
from mcpbench.analysis.traces import CALL_COLUMNS, EVENT_COLUMNS, ROUND_COLUMNS, SESSION_COLUMNS, VIOLATION_COLUMNS
from mcpbench.trace import TraceWriter
from tests.support.traces import HEADER, handshake, tool_call, tool_text

import orjson


def make_trace(path):
    with TraceWriter(path, transport="stdio") as writer:
        steps = [
            ("c2s", b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"host","version":"1"}}}', 10.0),
            ("s2c", b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","serverInfo":{"name":"srv","version":"2"}}}', 10.5),
            ("c2s", b'{"jsonrpc":"2.0","method":"notifications/initialized"}', 10.6),
            ("c2s", b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}', 11.0),
            ("s2c", b'{"jsonrpc":"2.0","id":2,"result":{"content":[],"isError":true}}', 11.002),
            ("c2s", b'{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"summarize"}}', 11.5),
            ("s2c", b'{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"no such prompt"}}', 11.504),
            ("c2s", b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}', 12.0),
        ]
        for direction, raw, ts in steps:
            writer.message("s1", direction, raw, ts)
        writer.write({"kind": "violation", "session": "s1", "dir": "s2c", "ts": 12.5, "code": "stdout-pollution", "detail": "not JSON: hi"})
    return path


def test_calls_pair_requests_with_typed_columns(tmp_path):
    frames = load_trace(make_trace(tmp_path / "t.jsonl"))
    calls = frames.calls
    assert list(calls.columns) == CALL_COLUMNS
    assert list(calls["step"]) == ["initialize", "tools/call echo", "prompts/get summarize", "tools/list"]
    assert calls["latency_ms"].round(3).tolist()[:3] == [500.0, 2.0, 4.0]
    assert calls["latency_ms"].isna().tolist() == [False, False, False, True]
    assert list(calls["outcome"]) == ["ok", "tool-error", "error", "unanswered"]
    assert calls["error_code"].tolist()[2] == -32602 and calls["error_code"].isna().sum() == 3
    assert calls["tool"].tolist()[1] == "echo"
    assert isinstance(calls["start"].dtype, pd.DatetimeTZDtype) and str(calls["start"].dt.tz) == "UTC" and calls["start"].iloc[0] == pd.Timestamp(10.0, unit="s", tz="UTC")
    for column in ("method", "tool", "transport", "era", "outcome"):
        assert isinstance(calls[column].dtype, pd.CategoricalDtype), column
    assert set(calls["era"]) == {"handshake"} and calls["request_bytes"].iloc[0] > 80
    session = frames.sessions.iloc[0]
    assert (session["client"], session["server"], session["version"]) == ("host", "srv", "2025-11-25")
    assert session["handshake_ms"] == pytest.approx(600.0)
    assert (session["calls"], session["errors"], session["tool_errors"], session["unanswered"], session["violations"]) == (4, 1, 1, 1, 1)
    assert list(frames.violations["code"]) == ["stdout-pollution"]
    assert len(frames.events) == 9 and list(frames.events.columns) == EVENT_COLUMNS
    table = latency_table(calls)
    assert list(table.index) == ["tools/call echo", "prompts/get summarize", "initialize"]
    assert outcome_table(calls).loc["tools/list", "unanswered"] == 1


@pytest.mark.timeout(300)  # may make the captures first (a replay; the main job adds its own limit)
def test_same_frames_from_every_capture_path(captures):
    paths = {name: captures / f"{name}.jsonl" for name in ("stdio-legacy", "stdio-auto", "http-legacy", "http-auto", "sse", "replay")}
    dtypes = None
    for name, path in paths.items():
        frames = load_trace(path)
        for frame, columns in ((frames.calls, CALL_COLUMNS), (frames.sessions, SESSION_COLUMNS), (frames.violations, VIOLATION_COLUMNS), (frames.events, EVENT_COLUMNS)):
            assert list(frame.columns) == columns, name
        calls = frames.calls
        current = [str(t) for t in calls.dtypes]
        assert dtypes is None or current == dtypes, name
        dtypes = current
        tools = calls.loc[calls["method"] == "tools/call"]
        # every tool the SDK session called was paired with its answer, with a latency
        assert {"echo", "add", "fail", "big", "slow"} <= set(tools["tool"].astype(str)), name
        assert tools["latency_ms"].notna().all() and (tools["latency_ms"] >= 0).all(), name
        assert tools.loc[tools["tool"] == "fail", "outcome"].astype(str).tolist() == ["tool-error"], name
        assert tools.loc[tools["tool"] == "big", "answer_bytes"].iloc[0] > 100_000, name
        assert frames.sessions["calls"].sum() == len(calls), name
    both = load_trace([paths["stdio-legacy"], paths["stdio-auto"]])
    eras = both.calls.groupby("trace", observed=True)["era"].agg(lambda s: set(s.astype(str)))
    assert eras["stdio-legacy.jsonl"] == {"handshake"} and eras["stdio-auto.jsonl"] == {"stateless"}
    http = load_trace(paths["http-legacy"]).calls
    answered_by_sse = http.loc[http["ttfe_ms"].notna()]
    assert len(answered_by_sse) and (answered_by_sse["ttfe_ms"] <= answered_by_sse["latency_ms"] + 1e-6).all()
    assert load_trace(paths["sse"]).calls["transport"].astype(str).unique().tolist() == ["sse"]


def test_load_samples_skips_counters(tmp_path):
    path = tmp_path / "samples.jsonl"
    rows = [
        {"t": 1.0, "type": "stdio", "step": "ping", "latency_ms": 1.5, "size": 10, "failure": None},
        {"open": {"scheduled": 3}},
        {"t": 2.0, "type": "stdio", "step": "ping", "latency_ms": 2.5, "size": 10, "failure": "tool-error"},
    ]
    path.write_bytes(b"\n".join(orjson.dumps(row) for row in rows) + b"\n{\"t\": 3")
    frame = load_samples(path)
    assert len(frame) == 2 and frame["latency_ms"].sum() == 4.0
    assert latency_table(frame).loc["ping", "count"] == 2
    assert frame["failure"].astype(str).tolist()[1] == "tool-error"



def test_load_samples_drops_start_times_not_the_runs(tmp_path):
    """A stray `t` (0: a clock not yet set; milliseconds; null; text) is dropped with a warning naming
    its line, not kept to make the run's per-second series decades long."""
    from mcpbench.analysis.results import DroppedSamples

    path = tmp_path / "samples.jsonl"
    start = 1_765_000_000.0
    good = [{"t": start + i / 10, "type": "stdio", "step": "ping", "latency_ms": 1.0, "size": 1, "failure": None} for i in range(20)]
    stray = [{**good[0], "t": t} for t in (0, start * 1000, None, "soon")]
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in [*good[:10], *stray, *good[10:]]))
    with pytest.warns(DroppedSamples) as caught:
        frame = load_samples(path)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith(f"{path}: 4 samples dropped") and "line 11 (t=0)" in message and "line 14 (t='soon')" in message
    assert len(frame) == 20
    assert len(frame.set_index("t")["step"].resample("1s").size()) == 2  # two seconds, not 56 years of them


def test_a_sample_without_its_start_is_written_with_now():
    import time

    from mcpbench.load.samples import sample_line

    before = time.time()
    for start in (None, float("nan")):
        t = orjson.loads(sample_line("stdio", "ping", 250.0, 1, start_time=start))["t"]
        assert before - 1.0 <= t <= time.time()

@pytest.mark.timeout(300)
def test_load_run_lab_and_replay(load_folder, lab_folder, captures, tmp_path):
    run = load_run(load_folder)
    assert len(run.samples) > 0 and run.summary["total"]["count"] == len(run.samples)
    assert "Name" in run.stats and "Timestamp" in run.history
    assert str(run.samples["t"].dtype).endswith("UTC]")
    lab = load_lab(lab_folder)
    assert len(lab.sticky) == 6 and lab.reconnect is None
    failed = lab.sticky_failures.set_index(["mode", "policy"])["failed_sessions"]
    assert failed[("stateful-sse", "round-robin")] == 20 and failed[("stateful-sse", "sticky-header")] == 0
    report = load_replay(captures / "replay.json")
    assert report.exit_code == 0 and report.counts["identical"] == len(report.calls.query("status == 'identical'")) > 0
    assert report.changes.empty
    with pytest.raises(ResultsError, match="not a lab run"):
        load_lab(tmp_path)
    with pytest.raises(ResultsError, match="not a load run"):
        load_run(tmp_path)


def test_public_api_is_lazy_and_complete():
    import subprocess
    import sys

    import mcpbench.analysis as analysis

    assert sorted(analysis.__all__) == sorted(["load_trace", "TraceFrames", "load_run", "load_lab", "load_reconnect", "load_replay", "load_samples"])
    for name in analysis.__all__:
        assert callable(getattr(analysis, name)), name
    with pytest.raises(AttributeError):
        analysis.no_such_loader  # noqa: B018
    # `mcpbench inspect` and the recorders import the package without paying for pandas
    probe = "import sys, mcpbench.analysis, mcpbench.analysis.inspect; print('pandas' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_bench_traffic_loads_as_the_mix_says(tmp_path):
    from mcpbench.bench.analysis import CALLS_PER_SESSION, LARGE_BYTES, synthetic_trace

    frames = load_trace(synthetic_trace(tmp_path / "t.jsonl", 3000), events=False)
    calls = frames.calls
    assert len(frames.sessions) == len(calls) // (CALLS_PER_SESSION + 1) and calls["latency_ms"].notna().all()
    tools = calls["tool"].astype(str).value_counts()
    assert tools["echo"] > 10 * tools["big"] > 0 and tools["slow"] > 0
    assert (calls.loc[calls["tool"] == "big", "answer_bytes"] > LARGE_BYTES).all()
    assert set(calls["outcome"].astype(str)) == {"ok", "tool-error"}
    assert (frames.sessions["handshake_ms"] > 0).all() and set(frames.sessions["server"].astype(str)) == {"bench-server"}


def test_a_message_the_core_cannot_read_is_a_violation_and_an_event(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, transport="stdio") as writer:
        writer.write({"kind": "message", "session": "s", "dir": "c2s", "ts": 1.0, "msg": {"jsonrpc": "1.0", "id": 1}})
        writer.message("s", "c2s", b'{"jsonrpc":"2.0","id":1,"method":"ping"}', 1.1)
    frames = load_trace(path)
    assert frames.events["name"].astype(str).tolist() == ["invalid-message", "ping"]
    assert frames.violations["detail"].tolist() == ['"jsonrpc" must be "2.0"']
    assert frames.calls["step"].tolist() == ["ping"] and frames.sessions["violations"].tolist() == [1]


def test_calls_has_one_row_per_operation_and_rounds_one_per_request(tmp_path):
    from tests.support.traces import answered, asks, done, request, write_trace

    path = write_trace(tmp_path / "t.jsonl", [request(2.0, 1), asks(2.1, 1), request(5.1, 2, responses=answered()), done(5.3, 2),
                                              request(6.0, 3, name="echo"), done(6.01, 3)])
    frames = load_trace(path)
    calls, rounds = frames.calls, frames.rounds
    assert calls["step"].astype(str).tolist() == ["tools/call ask", "tools/call echo"]
    assert calls["rounds"].tolist() == [2, 1] and calls["outcome"].astype(str).tolist() == ["ok", "ok"]
    assert calls["latency_ms"].round(3).tolist() == [3300.0, 10.0] and calls["client_wait_ms"].round(3).tolist() == [3000.0, 0.0]
    assert list(rounds.columns) == ROUND_COLUMNS and rounds["call"].tolist() == [0, 0, 1]
    assert rounds["outcome"].tolist() == ["input-required", "ok", "ok"] and rounds["id"].tolist() == [1, 2, 3]
    assert rounds["wait_ms"].round(3).fillna(-1).tolist() == [-1, 3000.0, -1]
    assert rounds["latency_ms"].round(3).tolist() == [100.0, 200.0, 10.0]
    assert frames.sessions["calls"].tolist() == [2]


@pytest.mark.timeout(300)  # may make the captures first (the main job adds its own limit)
def test_the_main_jobs_ask_is_one_operation_of_two_rounds_in_every_view(captures):
    import json

    from click.testing import CliRunner

    from mcpbench.cli import main

    for name in ("stdio-auto", "http-auto"):
        path = captures / f"{name}.jsonl"
        calls = load_trace(path).calls
        ask = calls.loc[calls["tool"] == "ask"]
        assert ask["rounds"].tolist() == [2] and ask["outcome"].astype(str).tolist() == ["ok"], name
        report = json.loads(CliRunner().invoke(main, ["inspect", "--json", str(path)]).output)
        assert report["methods"]["tools/call ask"]["count"] == 1 and report["methods"]["tools/call ask"]["rounds"] == 2, name
        (operation,) = [op for op in report["operations"] if op["name"] == "tools/call ask"]
        assert [r["outcome"] for r in operation["rounds"]] == ["input-required", "ok"], name
        text = CliRunner().invoke(main, ["inspect", str(path)]).output
        assert text.count("tools/call ask") == 1 and "(2 rounds" in text and "round 2 (id" in text, name


def interleaved_trace(path):
    """Two stdio sessions whose plain calls interleave (answered, tool errors, JSON-RPC errors, one left
    open), then a 2026-07-28 operation of two rounds: rows of every kind the frames are cut from."""
    from tests.support.traces import answered, asks, done, event, handshake, request, tool_call, tool_text, write_trace

    calls, ts = [], 2.0
    for i in range(1, 30):
        for session in ("a", "b"):
            calls.append(tool_call(ts, i, ("echo", "fail", "big")[i % 3], session=session))
            ts += 0.001
        for session in ("b", "a"):
            if i % 7 == 0:
                calls.append(event(ts, session, "s2c", {"jsonrpc": "2.0", "id": i, "error": {"code": -32000 - i, "message": f"bad {i}"}}))
            elif i % 5 == 0:
                calls.append(event(ts, session, "s2c", {"jsonrpc": "2.0", "id": i, "result": {"content": [], "isError": True}}))
            elif not (i == 29 and session == "a"):
                calls.append(tool_text(ts, i, "x" * i, session=session))
            ts += 0.001
    rounds = [request(90.0, 1, session="m"), asks(90.1, 1, session="m"), request(93.1, 2, responses=answered(), session="m"),
              done(93.3, 2, session="m")]
    return write_trace(path, handshake(1.0, session="a"), handshake(1.05, session="b"), calls, rounds)


def test_the_frames_are_the_same_with_or_without_events(tmp_path):
    # without events the model takes plain calls on its hot path, as columns; with them every event makes objects
    path = interleaved_trace(tmp_path / "t.jsonl")
    fast, whole = load_trace(path, events=False), load_trace(path)
    for name in ("calls", "rounds", "sessions", "violations"):
        pd.testing.assert_frame_equal(getattr(fast, name), getattr(whole, name), check_exact=True, obj=name)
    calls = fast.calls
    assert calls["outcome"].astype(str).value_counts().to_dict() == {"ok": 42, "error": 8, "tool-error": 10, "unanswered": 1}
    assert calls["session"].astype(str).tolist() == ["a", "b"] * 30 + ["m"]  # in the order they began
    assert calls["rounds"].tolist() == [1] * 60 + [2] and fast.rounds["session"].astype(str).tolist() == ["a", "b"] * 30 + ["m"] * 2
    assert calls["error_code"].dropna().tolist() == [-32007, -32007, -32014, -32014, -32021, -32021, -32028, -32028]


def test_changing_the_calls_frame_changes_no_other(tmp_path):
    path = interleaved_trace(tmp_path / "t.jsonl")
    frames, untouched = load_trace(path, events=False), load_trace(path, events=False)
    calls = frames.calls
    calls.loc[calls.index, ["rounds", "request_bytes"]] = 9
    calls.loc[calls.index, "outcome"] = "ok"
    calls.loc[calls.index, "latency_ms"] = 0.0
    for name in ("rounds", "sessions"):
        pd.testing.assert_frame_equal(getattr(frames, name), getattr(untouched, name), check_exact=True, obj=name)


def test_a_message_deeper_than_orjson_writes_is_measured_in_its_place(tmp_path):
    """Sizes are measured a batch at a time; a message too deep for orjson measures that batch again one
    by one, so every call keeps its own sizes, the deep one's as compact JSON too."""
    deep: dict = {}
    for _ in range(300):  # orjson writes 254 levels
        deep = {"a": deep}
    calls = [(tool_call(2.0 + i, i, "echo", arguments), tool_text(2.5 + i, i, f"answer {i}"))
             for i, arguments in enumerate([{"x": 1}, deep, {}], start=1)]
    events = [*handshake(), *[e for pair in calls for e in pair]]
    trace = tmp_path / "deep.jsonl"  # written by `json`: orjson cannot
    trace.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in [HEADER, *events]))

    def compact(event: dict) -> int:
        return len(json.dumps(event["msg"], separators=(",", ":"), ensure_ascii=False).encode())

    frame = load_trace(trace, events=False).calls
    frame = frame[frame["method"] == "tools/call"]
    assert frame["request_bytes"].tolist() == [compact(request) for request, _ in calls]
    assert frame["answer_bytes"].tolist() == [compact(answer) for _, answer in calls]
