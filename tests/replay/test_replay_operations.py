"""`mcpbench replay` of whole operations (issue 35, item 5): input rounds, tasks and listen streams.

The drives of tests/support/operations.py (the official SDK 2.x client: `ask`'s input round, `work` as a
task in both forms, one cancelled, a listen stream told of two `toggle_tool` changes), recorded
through the tee (stdio) and `record` (Streamable HTTP, legacy SSE). Replayed against the same server,
every operation comes out identical: the rounds answered from the recording by key with the live
state, each task followed live with its own polls and its end compared, the listen stream's changes
each heard after the request that caused it. Against a server that asks under a new key, whose tasks
fail, or whose tasks never end, the replay exits 1 naming that.
"""

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
import pytest

from mcpbench.lab.peers.drive import sdk_target
from mcpbench.lab.peers.variant_server import ASK_NEW_KEY
from mcpbench.replay import plan as plans
from mcpbench.replay.operations import OPENED, listen_views, recorded_causes
from tests.replay.helpers import cli, mock_server
from tests.support.operations import DRIVES, stdio_recording
from tests.support.peers import recording_proxy
from tests.support.servers import reference_server

TRANSPORTS = ("stdio", "streamable-http", "sse")
LAB_STDIO = "stdio:" + " ".join([sys.executable, "-m", "mcpbench", "lab", "serve", "--transport", "stdio", "--tasks"])


def variant(mode: str) -> str:
    return "stdio:" + " ".join([sys.executable, "-m", "mcpbench.lab.peers.variant_server", mode])




HTTP = ("streamable-http", "sse")


@pytest.fixture(scope="module")
def lab_http() -> Iterator[dict[str, str]]:
    """The replays' HTTP targets: servers of their own (`tasks/list` lists every task a server holds)."""
    with reference_server("streamable-http", extra_args=["--tasks"]) as http, reference_server("sse", extra_args=["--tasks"]) as sse:
        yield {"streamable-http": http.url, "sse": "sse+" + sse.url}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """transport -> one recording of every drive (a session or two each)."""
    folder = tmp_path_factory.mktemp("operations")
    out = {transport: folder / f"{transport}.jsonl" for transport in HTTP}
    out["stdio"] = stdio_recording(tmp_path_factory.getbasetemp())[0]  # (shared with test_mock_operations.py)
    for transport in HTTP:
        with reference_server(transport, extra_args=["--tasks"]) as recorded, recording_proxy(recorded.url, out[transport]) as url:
            for drive in DRIVES.values():
                anyio.run(drive, lambda: sdk_target(url, transport))  # noqa: B023 - run before the loop moves on
    return out


def replayed(trace: Path, target: str, tmp_path: Path, *options: str) -> tuple[int, dict, str]:
    report = tmp_path / "report.json"
    done = cli("replay", str(trace), "--target", target, "--report", str(report), *options)
    return done.returncode, json.loads(report.read_text()), done.stdout + done.stderr


def sessions_calling(trace: Path, name: str) -> list[str]:
    """`--session` options for the recorded sessions that call the tool `name` (a replay of those alone)."""
    ids = [p.id for p in plans.load(trace).sessions if any(c.name == name for c in p.calls)]
    return [option for sid in ids for option in ("--session", sid)]


def calls(report: dict) -> list[dict]:
    return [call for session in report["sessions"] for call in session["calls"]]


@pytest.mark.slow  # a replay of four or five sessions against the lab server
@pytest.mark.timeout(300)  # and the module's recordings first
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_rounds_tasks_and_listen_streams_replay_identical_against_the_recorded_server(traces, lab_http, transport, tmp_path):
    code, report, said = replayed(traces[transport], LAB_STDIO if transport == "stdio" else lab_http[transport], tmp_path)
    assert code == 0, said
    assert report["counts"]["changed"] == report["counts"]["failed"] == report["counts"]["missing"] == 0, said
    done = calls(report)
    # ask: both rounds sent live (the retry with the recorded answer under its key and the live state) and compared
    assert [c["status"] for c in done if c["name"] == "ask"] == ["identical", "identical"], said
    # tasks: each followed live to its end, the recorded polls replaced, the end compared; the one that
    # asked for input mid-task got its tasks/update after the live poll that asked, with the recorded answer
    ends = [c for c in done if (c["detail"] or "").startswith("task followed live")]
    assert len(ends) == 3 and all(c["status"] == "identical" and "completed" in c["detail"] for c in ends), said
    assert any("input_required → working" in c["detail"] for c in ends), said
    assert any(c["status"] == "skipped" and c["method"] == "tasks/get" for c in done), said
    (update,) = [c for c in done if c["method"] == "tasks/update"]
    assert update["status"] == "skipped" and "replaced by the replay's own" in update["detail"], said
    cancels = [c for c in done if c["method"] == "tasks/cancel"]
    assert len(cancels) == 2 and all(c["status"] == "identical" for c in cancels), said  # cancelled as recorded
    # listen: the stream's acknowledgement and two changes, each heard after its toggle
    (listen,) = [c for c in done if c["method"] == "subscriptions/listen"]
    assert listen["status"] == "identical", said


@pytest.mark.slow  # two replays against changed stdio servers
@pytest.mark.timeout(300)  # (the module's recordings first, when run alone)
def test_a_live_server_that_asks_a_new_key_or_whose_task_fails_is_a_change_named(traces, tmp_path):
    code, report, said = replayed(traces["stdio"], variant("ask-key"), tmp_path, *sessions_calling(traces["stdio"], "ask"))
    assert code == 1, said
    assert f"asks for input {ASK_NEW_KEY!r}" in said and "which the recording never answered" in said
    (retry,) = [c for c in calls(report) if c["name"] == "ask" and c["status"] == "failed"]
    assert retry["changes"][0]["path"] == f"inputRequests[{ASK_NEW_KEY!r}]"

    code, report, said = replayed(traces["stdio"], variant("work-fails"), tmp_path, *sessions_calling(traces["stdio"], "work"))
    assert code == 1, said
    named = [change for c in calls(report) for change in c["changes"] if change["path"] == "task"]
    assert len(named) == 3 and all("task-failed" in change["new"] for change in named), said  # one a form, and the asking one


def never_ending(trace: Path, out: Path) -> Path:
    """`trace` with every task's polls saying `working`: a server whose tasks never end."""
    lines = []
    for line in trace.read_bytes().splitlines():
        event = orjson.loads(line)
        result = (event.get("msg") or {}).get("result") if isinstance(event.get("msg"), dict) else None
        if event.get("dir") == "s2c" and isinstance(result, dict) and result.get("status") == "completed":
            result["status"] = "working"
            result.pop("result", None)
        lines.append(orjson.dumps(event))
    out.write_bytes(b"\n".join(lines) + b"\n")
    return out


@pytest.mark.slow  # a replay against the mock
@pytest.mark.timeout(300)  # (the module's recordings first, when run alone)
def test_a_task_that_never_ends_is_cancelled_at_the_timeout_and_named(traces, tmp_path):
    # The mock of a server whose tasks never end: the replay polls within --timeout, then cancels (the
    # mock honours it) and names the task.
    with mock_server(never_ending(traces["streamable-http"], tmp_path / "never.jsonl"), "streamable-http") as url:
        code, report, said = replayed(traces["streamable-http"], url, tmp_path, "--timeout", "3",
                                      *sessions_calling(traces["streamable-http"], "work"))
    assert code == 1, said
    named = [(c["method"], change["new"]) for c in calls(report) for change in c["changes"] if change["path"] == "task"]
    assert len(named) == 3 and all("still working after 3 s: cancelled" in new for _, new in named), said  # (the asking one too)
    assert "tasks/result" in [method for method, _ in named]  # the 2025-11-25 form's end; the other, the last poll


def test_a_listen_stream_is_judged_by_the_changes_each_request_caused(traces):
    """The judge alone: a change the live server no longer sends is missing under its cause's name;
    one that came before its cause was sent is no match for it."""
    (plan,) = [p for p in plans.load(traces["stdio"]).sessions if any(c.method == "subscriptions/listen" for c in p.calls)]
    (listen,) = [c for c in plan.calls if c.method == "subscriptions/listen"]
    causes = recorded_causes(plan, listen)
    toggles = [c for c in plan.calls if c.name == "toggle_tool"]
    assert [label for label, _ in causes] == [OPENED] + [f"#{c.index} tools/call toggle_tool" for c in toggles]
    sent = {c.index: float(c.index) for c in plan.calls}  # the live requests left in order, one a second
    heard = [(sent[listen.index] + 0.5, note) for _, note in listen.server]
    heard[1] = (sent[toggles[0].index] + 0.5, heard[1][1])
    heard[2] = (sent[toggles[1].index] + 0.5, heard[2][1])
    old, new = listen_views(plan, listen, heard, sent)
    assert old == new
    old, new = listen_views(plan, listen, heard[:2], sent)  # the second toggle's change never came
    second = f"#{toggles[1].index} tools/call toggle_tool"
    assert new["changes"][second] == [] and old["changes"][second] == [{"method": "notifications/tools/list_changed"}]
    early = [heard[0], (sent[toggles[0].index] - 0.5, heard[1][1]), heard[2]]  # before its cause: not its change
    old, new = listen_views(plan, listen, early, sent)
    assert old != new
