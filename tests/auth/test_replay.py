"""Replay and serve-trace --on-miss forward against a protected reference server (`lab serve --auth`), and
the recording of an authenticated session replayed with a new token (real processes)."""

import orjson
import pytest

from mcpbench.auth.options import ClientOptions
from mcpbench.testing.regress import ReplayChanged, replay_trace
from mcpbench.trace.reader import read_trace
from tests.auth.helpers import FIXED_TOKEN, OAUTH, TOKEN_ENV, assert_no_secret, handshake_only, mcpbench, protected_server
from tests.record.helpers import record_proxy
from tests.replay.helpers import mock_server


@pytest.fixture(scope="module")
def oauth_server():
    with protected_server() as server:
        yield server


def replay(trace, target, *args, report=None):
    extra = ["--report", report] if report else []
    return mcpbench("replay", trace, "--target", target, *extra, *args)


def calls(report) -> list[dict]:
    return [call for session in orjson.loads(report.read_bytes())["sessions"] for call in session["calls"]]


def test_replay_with_discovery_gets_every_answer_the_recording_had(oauth_server, recordings, tmp_path):
    done = replay(recordings["legacy"], oauth_server.url, *OAUTH, report=tmp_path / "r.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {call["status"] for call in calls(tmp_path / "r.json")} == {"identical"}
    assert "note: OAuth requests: 1 challenge, 1 resource metadata, 1 server metadata, 1 token" in done.stdout
    assert_no_secret(done.stdout, done.stderr, files=[tmp_path])


def test_replay_with_a_fixed_token(oauth_server, recordings):
    done = replay(recordings["auto"], oauth_server.url, "--bearer-token-env", TOKEN_ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OAuth requests" not in done.stdout


def test_replay_without_credentials_fails_every_call_as_auth_required_naming_the_challenge(oauth_server, recordings, tmp_path):
    done = replay(recordings["legacy"], oauth_server.url, report=tmp_path / "r.json")
    assert done.returncode == 1, done.stdout + done.stderr
    results = calls(tmp_path / "r.json")
    assert results and all(call["status"] == "failed" and "(auth-required)" in call["detail"] for call in results)
    metadata = oauth_server.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert f"resource_metadata={metadata}" in results[0]["detail"]
    assert "the recording sent Authorization" not in done.stderr  # a stdio recording had none


def test_a_token_without_the_servers_scope_fails_every_call_as_auth_forbidden(oauth_server, recordings, tmp_path):
    done = replay(recordings["legacy"], oauth_server.url, *OAUTH, "--oauth-scope", "other", report=tmp_path / "r.json")
    assert done.returncode == 1, done.stdout + done.stderr
    results = calls(tmp_path / "r.json")
    assert results and all(call["status"] == "failed" and "(auth-forbidden)" in call["detail"] for call in results)
    assert "insufficient_scope" in results[0]["detail"]
    assert_no_secret(done.stdout, done.stderr, files=[tmp_path])


@pytest.mark.slow
def test_replay_over_legacy_sse_with_discovery_and_one_renewal_after_a_401(oauth_server, recordings, tmp_path):
    with protected_server("sse") as server:
        done = replay(recordings["legacy"], "sse+" + server.url, *OAUTH)
        refused = replay(recordings["legacy"], "sse+" + server.url, report=tmp_path / "r.json")
        # tokens of another server's authorization server: each refused call renews once and is sent again, once
        token_url = server.url.replace("/sse", "/oauth/token")
        foreign = replay(recordings["legacy"], oauth_server.url, "--oauth-token-url", token_url, *OAUTH[1:],
                         report=tmp_path / "foreign.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert refused.returncode == 1
    assert all("auth-required" in call["detail"] for call in calls(tmp_path / "r.json"))
    refused_calls = calls(tmp_path / "foreign.json")
    assert foreign.returncode == 1 and refused_calls and all("(auth-required)" in call["detail"] for call in refused_calls)
    assert f"note: OAuth requests: {1 + len(refused_calls)} token\n" in foreign.stdout  # the first, and one per refusal


def test_a_forwarder_sends_its_own_token_upstream(oauth_server, recordings, tmp_path):
    """serve-trace --on-miss forward: every call after the handshake is a miss, answered by the protected
    server with the forwarder's own token."""
    trace = handshake_only(recordings["legacy"], tmp_path / "handshake.jsonl")
    with mock_server(trace, "streamable-http", "--on-miss", "forward", oauth_server.url, *OAUTH) as url:
        done = replay(recordings["legacy"], url)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_a_recording_of_an_authenticated_session_replays_with_a_new_token(oauth_server, recordings, tmp_path):
    trace = tmp_path / "authenticated.jsonl"
    with record_proxy(oauth_server.url, trace) as (url, _):
        recorded = replay(recordings["legacy"], url, "--bearer-token-env", TOKEN_ENV)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    authorizations = {e["request_headers"].get("authorization") for e in read_trace(trace) if e.get("kind") == "http"
                      and isinstance(e.get("request_headers"), dict)}
    assert authorizations and all(value.startswith("redacted:") for value in authorizations)  # hashed, never replayable
    assert_no_secret(files=[trace])
    again = replay(trace, oauth_server.url, *OAUTH, report=tmp_path / "r.json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert {call["status"] for call in calls(tmp_path / "r.json")} == {"identical"}
    assert "the recording sent Authorization" not in again.stderr
    bare = replay(trace, oauth_server.url)
    assert bare.returncode == 1
    assert bare.stderr.count("the recording sent Authorization (hashed in the trace, never replayed)") == 1


def test_the_pytest_helper_replays_against_a_protected_server_with_the_clients_options(oauth_server, recordings, monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, FIXED_TOKEN)
    report = replay_trace(recordings["auto"], oauth_server.url, client=ClientOptions(bearer_token_env=TOKEN_ENV))
    assert report.counts()["identical"] > 0 and not report.changed
    with pytest.raises(ReplayChanged, match="auth-required"):
        replay_trace(recordings["auto"], oauth_server.url)
