"""The official TypeScript SDK (v2), client and server (tests/support/peers/ts), recorded through the
tee and `mcpbench record` in both eras: the trace model sees what they did, and every view agrees
(issue 33). In 2026-07-28 `ask` is one operation of two rounds and a listen stream is a stream of
its own that the client closed; in 2025-11-25 `ask` holds the server's `elicitation/create`.

The TypeScript peers differ from the Python SDK as the specification allows: the client starts a
stdio server once for its `server/discover` probe and again for the session, closes a stdio listen
stream with `notifications/cancelled` (which awaits no answer), answers every request over HTTP in an
SSE stream, and serves the 2025 era on sessions of its own beside the sessionless 2026-07-28.
"""

import sys
from pathlib import Path

import pytest

from mcpbench.analysis.inspect import summarize
from mcpbench.trace.model import TracedOperation
from mcpbench.trace.reader import TraceReader
from tests.support import peers
from tests.support.recordings import tee_argv
from tests.support.views import assert_views_agree

pytestmark = pytest.mark.slow  # the first test installs the SDK with npm; each session starts Node.js

ERAS = {"auto": "2026-07-28", "legacy": "2025-11-25"}


def operations(path: Path) -> list[TracedOperation]:
    return [op for session in summarize(path).sessions for op in session.operations]


def one(ops: list[TracedOperation], name: str) -> TracedOperation:
    (op,) = [op for op in ops if op.name == name]
    return op


def assert_seen_as_done(path: Path, era: str, toggle: str = "tools/call toggle") -> dict:
    """What the model must see of the client's session in `path`; returns inspect's --json."""
    report = assert_views_agree(path)
    ops = operations(path)
    assert {session["version"] for session in report["sessions"]} == {ERAS[era]}
    ask = one(ops, "tools/call ask")
    assert ask.outcome == "ok"
    if era == "auto":  # one operation, two rounds (the retry a new id, the question's key answered)
        assert [(r.outcome, r.detail) for r in ask.rounds] == [("input-required", ask.rounds[0].detail), ("ok", "")]
        assert ask.rounds[0].id != ask.rounds[1].id and not ask.inner
        listen = one(ops, "subscriptions/listen")
        assert listen.outcome == "closed" and listen.stream.acknowledged is not None
        assert [method for _, method in listen.stream.notifications] == [
            "notifications/subscriptions/acknowledged", "notifications/tools/list_changed"]
    else:  # the server's question is a request inside the call
        assert len(ask.rounds) == 1 and [(inner.method, inner.outcome) for inner in ask.inner] == [("elicitation/create", "ok")]
        assert not [op for op in ops if op.method == "subscriptions/listen"]
    assert one(ops, toggle).outcome == "ok"
    assert all(op.outcome for op in ops), [op.name for op in ops if not op.outcome]  # nothing left open
    # the recorder ended no request as unanswered (a cancelled listen stream awaits no answer)
    assert not [e for e in TraceReader(path) if e["kind"] == "error"]
    return report


@pytest.mark.parametrize("era", ERAS)
def test_client_and_server_over_stdio_through_the_tee(ts_sdk, tmp_path, era):
    out = tmp_path / "t.jsonl"
    got = peers.ts_client(ts_sdk, era, "stdio", *tee_argv(out, peers.ts_server_argv(ts_sdk, "stdio")))
    assert (got["version"], got["echo"], got["ask"], got["heard"]) == (ERAS[era], "hi", "answered: yes", True)
    report = assert_seen_as_done(out, era)
    # auto: the probe's server process (killed once it answered) and the session's
    assert [s["transport"] for s in report["sessions"]] == ["stdio"] * (2 if era == "auto" else 1)
    assert report["violations"] == {}


@pytest.mark.parametrize("era", ERAS)
def test_client_and_server_over_streamable_http_through_record(ts_sdk, tmp_path, era):
    out = tmp_path / "t.jsonl"
    with peers.http_peer(peers.ts_server_argv(ts_sdk, "http")) as upstream, peers.recording_proxy(upstream, out) as url:
        got = peers.ts_client(ts_sdk, era, url)
    assert (got["version"], got["ask"], got["heard"]) == (ERAS[era], "answered: yes", True)
    report = assert_seen_as_done(out, era)
    if era == "auto":
        # The client closes its listen stream and also POSTs `notifications/cancelled` for it, without
        # the `Mcp-Method` header 2026-07-28 requires on every POST: named, with the notification's line.
        assert report["violations"] == {"missing-method-header": 1}
        (violation,) = [e for e in TraceReader(out) if e["kind"] == "violation"]
        assert violation["detail"] == "notifications/cancelled without an Mcp-Method header in 2026-07-28"
    else:
        assert report["violations"] == {}


@pytest.mark.parametrize("era", ERAS)
def test_the_typescript_client_against_the_reference_server(ts_sdk, tmp_path, era):
    """The TypeScript client answers the reference server's `ask` (an elicitation: it declares no sampling)."""
    out = tmp_path / "t.jsonl"
    server = [sys.executable, "-m", "mcpbench", "lab", "serve", "--transport", "stdio"]
    got = peers.ts_client(ts_sdk, era, "stdio", *tee_argv(out, server))
    assert (got["version"], got["ask"], got["heard"]) == (ERAS[era], "yes", True)
    assert assert_seen_as_done(out, era, toggle="tools/call toggle_tool")["violations"] == {}
