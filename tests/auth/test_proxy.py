"""Through mitmdump as a regular HTTP proxy, with the recording addon: replay and load reach the protected
server through it (`--proxy`, `HTTP_PROXY`), and its trace keeps the challenge, the discovery and the token
requests with every secret redacted; `inspect` classes the refused calls (real processes)."""

import http.client
import json
import urllib.parse

import pytest

from mcpbench.protocol.auth import form
from mcpbench.trace.reader import read_trace
from tests.auth.helpers import CLIENT_ID, CLIENT_SECRET, OAUTH, assert_no_secret, credentials_env, mcpbench, protected_server
from tests.record.helpers import mitmdump
from tests.support.servers import HOST

pytestmark = pytest.mark.slow


def token_by_form(proxy_port: int, token_url: str) -> int:
    """A token request with the secret in its form (client_secret_post), sent through the proxy."""
    conn = http.client.HTTPConnection(HOST, proxy_port, timeout=30)
    try:
        body = form([("grant_type", "client_credentials"), ("client_id", CLIENT_ID), ("client_secret", CLIENT_SECRET)])
        conn.request("POST", token_url, body, {"content-type": "application/x-www-form-urlencoded"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_replay_and_load_through_a_proxy_whose_trace_keeps_every_step_without_a_secret(recordings, tmp_path):
    scenario = tmp_path / "s.yaml"
    with protected_server() as server, mitmdump(None, tmp_path / "proxy.jsonl") as proxy:
        scenario.write_text(f"target: {server.url}\nmix: [{{call: tools/list}}]\nusers: 2\nspawn_rate: 20\nduration: 2s\n"
                            "thresholds: ['fail_ratio < 0.01']\n")
        refused = mcpbench("replay", recordings["legacy"], "--target", server.url, "--proxy", proxy.base)
        replayed = mcpbench("replay", recordings["legacy"], "--target", server.url, "--proxy", proxy.base, *OAUTH)
        loaded = mcpbench("load", scenario, "--out", tmp_path / "out", *OAUTH, env=credentials_env(HTTP_PROXY=proxy.base))
        status = token_by_form(proxy.port, server.url.replace("/mcp", "/oauth/token"))
    assert refused.returncode == 1 and replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert status == 200
    events = list(read_trace(proxy.trace))
    exchanges = [e for e in events if e.get("kind") == "http"]
    paths = {urllib.parse.urlsplit(e["url"]).path for e in exchanges}
    assert {"/mcp", "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server",
            "/oauth/token"} <= paths  # every request of both commands went through the proxy
    challenges = [e for e in exchanges if e["status"] == 401]
    assert challenges and all("resource_metadata=" in e["response_headers"]["www-authenticate"] for e in challenges)
    tokens = [e for e in exchanges if e["path"] == "/oauth/token"]
    assert all(json.loads(e["body"])["access_token"].startswith("redacted:") for e in tokens)
    assert any("client_secret=redacted:" in e.get("request_body", "") for e in tokens)
    assert all(e["request_headers"]["authorization"].startswith("redacted:") for e in tokens if "authorization" in e["request_headers"])
    assert_no_secret(refused.stdout, replayed.stdout, loaded.stdout, files=[proxy.trace, tmp_path / "out"])
    inspected = mcpbench("inspect", "--json", proxy.trace)
    outcomes = {outcome for stats in json.loads(inspected.stdout)["methods"].values() for outcome in stats["outcomes"]}
    assert "auth-required" in outcomes and "ok" in outcomes
