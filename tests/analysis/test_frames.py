import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import orjson  # noqa: E402

from mcpbench.analysis.frames import calls_frame, latency_table, plot_latency, samples_frame  # noqa: E402
from mcpbench.trace import TraceWriter  # noqa: E402


def make_trace(path):
    with TraceWriter(path, transport="stdio") as writer:
        steps = [
            ("c2s", b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}', 10.0),
            ("s2c", b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}', 10.5),
            ("c2s", b'{"jsonrpc":"2.0","method":"notifications/initialized"}', 10.6),
            ("c2s", b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}', 11.0),
            ("s2c", b'{"jsonrpc":"2.0","id":2,"result":{"content":[],"isError":true}}', 11.002),
            ("c2s", b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}', 12.0),
        ]
        for direction, raw, ts in steps:
            writer.message("s1", direction, raw, ts)
    return path


def test_calls_frame_pairs_requests(tmp_path):
    frame = calls_frame(make_trace(tmp_path / "t.jsonl"))
    assert list(frame["step"]) == ["initialize", "tools/call echo", "tools/list"]
    assert frame["latency_ms"].round(3).tolist()[:2] == [500.0, 2.0]
    assert frame["latency_ms"].isna().tolist() == [False, False, True]
    assert list(frame["outcome"]) == ["ok", "tool-error", "unanswered"]
    table = latency_table(frame)
    assert list(table.index) == ["tools/call echo", "initialize"]
    ax = plot_latency(frame, plt.figure().gca())
    assert [label.get_text() for label in ax.get_yticklabels()] == ["tools/call echo", "initialize"]


def test_samples_frame_skips_counters(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(
        b"\n".join(
            orjson.dumps(row)
            for row in [
                {"t": 1.0, "type": "stdio", "step": "ping", "latency_ms": 1.5, "size": 10, "failure": None},
                {"open": {"scheduled": 3}},
                {"t": 2.0, "type": "stdio", "step": "ping", "latency_ms": 2.5, "size": 10, "failure": "tool-error"},
            ]
        )
    )
    frame = samples_frame(path)
    assert len(frame) == 2 and frame["latency_ms"].sum() == 4.0
    assert latency_table(frame).loc["ping", "count"] == 2
