"""Replays against real reference-server processes, driven through the command line.

Recordings are stdio sessions of the official SDK client in both eras (tests/support/recordings.py). HTTP-transport
traces come from the replayer's own `--out`, which records what it exchanged with an HTTP server.
"""

import json
from pathlib import Path

import orjson
import pytest

from mcpbench.lab.peers.drive import SAMPLED_TEXT
from mcpbench.replay import plan as plans
from tests.replay.helpers import cli, variant_target
from tests.support.recordings import MODES, stdio_target
from tests.support.traces import header, lines, notified


def report_of(path: Path) -> dict:
    return json.loads(path.read_text())


def changed_paths(report: dict) -> dict[str, set[str]]:
    """{call label: {changed paths}} of the calls that did not come out identical."""
    out: dict[str, set[str]] = {}
    for session in report["sessions"]:
        for call in session["calls"]:
            if call["status"] != "identical" and call["status"] != "skipped":
                label = call["method"] + (f" {call['name']}" if call["name"] else "")
                out.setdefault(label, set()).update(change["path"] for change in call["changes"])
                if not call["changes"]:
                    out[label].add(call["status"])
    return out


@pytest.mark.parametrize("mode", MODES)
def test_stdio_replay_of_same_server_is_identical(recordings, tmp_path, mode):
    report = tmp_path / "r.json"
    out = tmp_path / "replayed.jsonl"
    done = cli("replay", str(recordings[mode]), "--target", stdio_target(), "--report", str(report), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    data = report_of(report)
    assert data["counts"]["identical"] == 10 + (1 if mode == "auto" else 0)  # auto: ask is two rounds
    assert data["counts"]["changed"] == data["counts"]["failed"] == data["counts"]["missing"] == 0
    assert "calls: " in done.stdout and "recorded" in done.stdout  # latency beside the recorded one
    # The replay's own trace compares equal to the recording without any server.
    diffed = cli("diff", str(recordings[mode]), str(out))
    assert diffed.returncode == 0, diffed.stdout


URL_SECRET = "k3y-0f-the-url-5a1"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_cross_transport_replay_and_http_traces(recordings, tmp_path, mode, transport, http_server, sse_server):
    """A stdio recording replayed over Streamable HTTP and legacy SSE: zero changes; the replay's HTTP
    trace, replayed again against the same server, also has zero changes."""
    server = http_server if transport == "streamable-http" else sse_server
    # A key in the URL, as hosted servers take one: it must not reach the replay's trace.
    target = f"{server.url}?api_key={URL_SECRET}" if transport == "streamable-http" else "sse+" + server.url
    out = tmp_path / "http.jsonl"
    done = cli("replay", str(recordings[mode]), "--target", target, "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    first = orjson.loads(out.read_bytes().split(b"\n", 1)[0])
    assert first["transport"] == transport and URL_SECRET.encode() not in out.read_bytes()
    again = cli("replay", str(out), "--target", target, "--report", str(tmp_path / "r.json"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert report_of(tmp_path / "r.json")["counts"]["identical"] >= 10


@pytest.mark.slow
def test_changed_server_names_exact_paths(recordings, tmp_path):
    trace = str(recordings["legacy"])
    expected = {
        "echo-text": {"tools/call echo": {"result.content[0].text", "result.structuredContent.result"}},
        "no-fail": {"tools/list": {"result.tools[3]"},
                    "tools/call fail": {"result.content[0].text"}},
        "slow-add": {"tools/call add": {"latency"}},
    }
    for mode, paths in expected.items():
        report = tmp_path / f"{mode}.json"
        latency = ["--fail-on-latency", "3"] if "latency" in str(paths) else []  # latency fails only when asked
        done = cli("replay", trace, "--target", variant_target(mode), "--report", str(report), *latency)
        assert done.returncode == 1, (mode, done.stdout, done.stderr)
        assert changed_paths(report_of(report)) == paths, (mode, done.stdout)
        if mode == "echo-text":
            assert '"héllo (v2)"' in done.stdout, done.stdout  # the old → new values are in the human summary too
    reported = cli("replay", trace, "--target", variant_target("slow-add"))
    assert reported.returncode == 0 and "slower ×" in reported.stdout, reported.stdout  # reported beside the call


def test_sampling_request_is_answered_from_the_recording(recordings, tmp_path):
    out = tmp_path / "out.jsonl"
    done = cli("replay", str(recordings["legacy"]), "--target", stdio_target(), "--out", str(out))
    assert done.returncode == 0, done.stdout
    events = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    messages = [e for e in events if e["kind"] == "message"]
    asks = [m for m in messages if m["dir"] == "s2c" and m["msg"].get("method") == "sampling/createMessage"]
    assert len(asks) == 1
    answers = [m for m in messages if m["dir"] == "c2s" and m["msg"].get("id") == asks[0]["msg"]["id"] and "result" in m["msg"]]
    assert answers and answers[0]["msg"]["result"]["content"]["text"] == SAMPLED_TEXT


def test_era_switch_replays_the_same_calls_in_2026(recordings, tmp_path, http_server):
    report = tmp_path / "r.json"
    done = cli("replay", str(recordings["legacy"]), "--target", http_server.url,
               "--protocol-version", "2026-07-28", "--report", str(report))
    assert done.returncode == 0, done.stdout
    data = report_of(report)
    assert data["counts"]["skipped"] == 1  # initialize
    assert data["counts"]["identical"] == 9  # ask: sampling became an input_required round, answered from the recording
    back = cli("replay", str(recordings["auto"]), "--target", http_server.url, "--protocol-version", "2025-11-25")
    assert back.returncode == 0, back.stdout


def test_learn_noise_against_a_deterministic_server_learns_nothing(recordings, tmp_path, http_server):
    noise = tmp_path / "noise.json"
    done = cli("replay", str(recordings["auto"]), "--target", http_server.url, "--learn-noise", "--noise-file", str(noise))
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(noise.read_text())["ignore"] == []
    assert cli("replay", str(recordings["auto"]), "--target", http_server.url, "--ignore-file", str(noise)).returncode == 0


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_bad_input_one_line_exit_2_and_partial_report(recordings, tmp_path):
    cases = {
        "newer.jsonl": [header(v=99)],
        "empty.jsonl": [],
        "server-only.jsonl": [header(), notified(2.0, "notifications/message", None, session="s")],
    }
    for name, events in cases.items():
        path = tmp_path / name
        path.write_bytes(lines(*events))
        report = tmp_path / f"{name}.report.json"
        done = cli("replay", str(path), "--target", stdio_target(), "--report", str(report))
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
        assert report_of(report)["aborted"]
    # A target that refuses the connection.
    report = tmp_path / "refused.json"
    done = cli("replay", str(recordings["legacy"]), "--target", "http://127.0.0.1:9/mcp", "--report", str(report))
    assert done.returncode == 3 and "Connection refused" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert report_of(report)["counts"]["failed"] > 0
    # A target that dies mid-replay: answers initialize, then exits.
    dies = tmp_path / "dies.py"
    dies.write_text(
        "import sys, json\n"
        "line = json.loads(sys.stdin.readline())\n"
        "sys.stdout.write(json.dumps({'jsonrpc': '2.0', 'id': line['id'], 'result': {'protocolVersion': '2025-11-25',"
        " 'capabilities': {}, 'serverInfo': {'name': 'x', 'version': '0'}}}) + '\\n')\n"
        "sys.stdout.flush()\nsys.stdin.readline()\nsys.stdin.readline()\nsys.exit(3)\n"
    )
    report = tmp_path / "dies.json"
    import sys as _sys

    done = cli("replay", str(recordings["legacy"]), "--target", f"stdio:{_sys.executable} {dies}", "--report", str(report))
    assert done.returncode == 3, done.stdout + done.stderr  # the environment: the target died
    assert "exited with status 3" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    data = report_of(report)
    assert data["aborted"] and data["counts"]["changed"] == 1 and data["counts"]["failed"] >= 1  # initialize differs


def test_diff_two_traces_without_a_server(recordings):
    done = cli("diff", str(recordings["legacy"]), str(recordings["auto"]))
    assert done.returncode == 1
    assert "server/discover" in done.stdout and "extra" in done.stdout
    assert cli("diff", str(recordings["legacy"]), str(recordings["legacy"])).returncode == 0


def test_plan_reads_the_recording(recordings):
    plan = plans.load(recordings["legacy"])
    (session,) = plan.sessions
    assert [call.label for call in session.calls][:3] == ["initialize", "tools/list", "tools/call echo"]
    assert session.version == "2025-11-25"
    (ask,) = session.asks
    assert ask.method == "sampling/createMessage" and ask.answer["result"]["content"]["text"] == SAMPLED_TEXT
    slow = next(call for call in session.calls if call.name == "slow")
    assert [n["method"] for n in slow.notifications] == ["notifications/progress"] * 2
