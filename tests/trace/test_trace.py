import os
import stat

import orjson
import pytest

from mcpbench.protocol.errors import TraceError
from mcpbench.trace import Kind, Redactor, TraceReader, TraceWriter, default_trace_path, read_trace
from mcpbench.trace.format import text_or_b64, to_bytes
from mcpbench.trace.redact import fingerprint


def write_sample(path, **kwargs):
    with TraceWriter(path, transport="stdio", header={"command": ["srv"]}, **kwargs) as writer:
        writer.message("s1", "c2s", b'{"jsonrpc":"2.0","id":1,"method":"ping"}', 1.5)
        writer.write({"session": "s1", "dir": "s2c", "kind": Kind.STDERR, "text": "log"})
    return path


def test_round_trip_keeps_message_bytes_and_mode_0600(tmp_path):
    path = write_sample(tmp_path / "t.jsonl")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    events = list(read_trace(path))
    assert [e["kind"] for e in events] == ["trace", "message", "stderr"]
    header, message, stderr = events
    assert header["command"] == ["srv"] and header["session"] is None
    assert message == {"v": 2, "ts": 1.5, "session": "s1", "transport": "stdio", "dir": "c2s", "kind": "message",
                       "msg": {"jsonrpc": "2.0", "id": 1, "method": "ping"}}
    assert set(stderr) >= {"v", "ts", "session", "transport", "dir", "kind"}
    # the message is spliced byte for byte, key order included
    assert b'"msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}' in path.read_bytes()


def test_torn_last_line_is_skipped_and_reported(tmp_path):
    path = write_sample(tmp_path / "t.jsonl")
    with open(path, "ab") as handle:
        handle.write(b'{"v":1,"ts":2,"kind":"mess')
    reader = TraceReader(path)
    assert len(list(reader)) == 3
    assert reader.torn and ":4:" in reader.torn


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "empty trace"),
        (b'{"v":1,"ts":1,"kind":"trace"}\nnot json\n{"v":1,"ts":1,"kind":"x"}\n', ":2: not JSON"),
        (b'{"v":1,"ts":1,"kind":"trace"}\n[1]\n', ":2: not a trace event"),
        (b'{"v":1,"ts":1,"kind":"trace"}\n{"v":1,"kind":"x"}\n', ":2: not a trace event: no 'ts'"),
        (b'{"v":9,"ts":1,"kind":"trace"}\n', ":1: trace format v9 is newer"),
        (b'{"v":1,"ts":1,"kind":"message"}\n', ":1: no trace header"),
    ],
)
def test_bad_traces_name_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(TraceError) as info:
        list(read_trace(path))
    assert str(path) in str(info.value) and message in str(info.value)


def test_missing_file_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match="cannot read trace"):
        list(read_trace(tmp_path / "nope.jsonl"))


def test_default_path_uses_env_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("MCPBENCH_TRACE_DIR", str(tmp_path))
    path = default_trace_path("python -m server/x")
    assert path.parent == tmp_path and path.name.endswith("-python_-m_server_x.jsonl")


def test_headers_redacted_by_default_and_comparable():
    redactor = Redactor()
    headers = redactor.header_pairs([("Authorization", "Bearer s3cret"), ("Cookie", "a=1"), ("Accept", "x"), ("X-API-Key", "k")])
    assert headers["accept"] == "x"
    assert headers["authorization"] == fingerprint("Bearer s3cret") != fingerprint("Bearer other")
    assert "s3cret" not in orjson.dumps(headers).decode()
    assert headers["cookie"].startswith("redacted:") and headers["x-api-key"].startswith("redacted:")


def test_secret_query_parameters_redacted_and_the_rest_kept_as_written():
    redactor = Redactor(["profile"])
    assert redactor.url("/messages?sessionId=abc") == "/messages?sessionId=abc"
    assert redactor.url("/mcp?API_KEY=a+b&x=1%202&profile=p#top") == (
        f"/mcp?API_KEY={fingerprint('a b')}&x=1%202&profile={fingerprint('p')}#top"
    )
    assert redactor.url("https://h:1/mcp") == "https://h:1/mcp"
    assert Redactor(defaults=False).url("/mcp?token=t") == "/mcp?token=t"


def test_json_rules_by_key_and_path():
    redactor = Redactor(["api_key", "params.arguments.*.token", "X-Tenant"])
    assert "x-tenant" in redactor.headers
    obj = {"params": {"arguments": {"a": {"token": "t1", "keep": 1}, "b": [{"api_key": "k"}]}}, "api_key": "k2"}
    redacted, changed = redactor.json(obj)
    assert changed
    assert redacted["params"]["arguments"]["a"] == {"token": fingerprint("t1"), "keep": 1}
    assert redacted["params"]["arguments"]["b"][0]["api_key"] == fingerprint("k")
    assert redacted["api_key"] == fingerprint("k2")
    assert obj["api_key"] == "k2"  # the input is not modified
    assert Redactor().json(obj) == (obj, False)


@pytest.mark.parametrize("rules", [(), ("password",)])
def test_messages_of_one_read_encode_as_each_would_alone(tmp_path, rules):
    raws = [b'{"jsonrpc":"2.0","id":1,"method":"ping"}', b' {"jsonrpc":"2.0","method":"x","params":{"password":"p"}} ']
    with TraceWriter(tmp_path / "t.jsonl", transport="stdio", redactor=Redactor(rules)) as writer:
        together = writer.encode_messages("s", "s2c", raws, 2.25)
        assert together == b"".join(writer.encode_message("s", "s2c", raw, 2.25) for raw in raws)
    assert together.count(b"\n") == 2 and (b'"p"' in together) == (not rules)


def test_writer_applies_json_redaction(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, transport="stdio", redactor=Redactor(["password"])) as writer:
        writer.message("s", "c2s", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"password":"hunter2"}}}', 1.0)
    assert b"hunter2" not in path.read_bytes()


def test_bytes_tagging():
    assert text_or_b64(b"ok") == "ok"
    tagged = text_or_b64(b"\xff\x00")
    assert tagged == {"b64": "/wA="} and to_bytes(tagged) == b"\xff\x00"
