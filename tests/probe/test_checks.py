"""Each check's verdict both ways, on reference servers put into the state it must tell apart."""

import json
import urllib.parse

import pytest

from mcpbench.probe.target import ProbeSettings
from mcpbench.probe.verdicts import FAIL, NA, PASS
from mcpbench.trace.reader import read_trace
from tests.auth.helpers import OAUTH, assert_no_secret, mcpbench, protected_server
from tests.probe.helpers import auth_server, verdict, verdicts
from tests.record.helpers import mitmdump

pytestmark = pytest.mark.slow  # a few seconds each, servers started once for all


def test_versions_pass_and_fail(resumable_server, quirky_server):
    good = verdict(resumable_server.url, "versions")
    assert good.verdict == PASS, good
    assert good.figures["bogus_version_status"] == 400 and good.figures["discover"]["ok"]
    assert good.figures["negotiated"] in good.figures["accepted"]
    bad = verdict(quirky_server.url, "versions")  # --ignore-version-header
    assert bad.verdict == FAIL and bad.figures["bogus_version_status"] == 200, bad
    assert "MCP-Protocol-Version" in bad.fix


def test_unknown_session_pass_and_fail(resumable_server, quirky_server):
    good = verdict(resumable_server.url, "unknown")
    assert good.verdict == PASS and good.figures["made_up"]["status"] == good.figures["ended"]["status"] == 404, good
    bad = verdict(quirky_server.url, "unknown")  # --unknown-session-status 400
    assert bad.verdict == FAIL and bad.figures["made_up"]["status"] == 400, bad
    assert bad.figures["ended"]["status"] == 400 and "404" in bad.fix


def test_resume_pass_without_a_store_and_with_a_leaking_one(resumable_server, http_server, quirky_server):
    good = verdict(resumable_server.url, "resume")
    assert good.verdict == PASS, good
    figures = good.figures
    assert figures["primed"] and figures["retry_ms"] == 500 and figures["resumes"] == 2  # cut twice, resumed twice
    assert figures["answers"] == 1 and figures["progress"] == list(range(1, 9)) and figures["duplicated_events"] == 0
    assert figures["foreign"]["leaked"] == 0
    no_store = verdict(http_server.url, "resume")
    assert no_store.verdict == FAIL and no_store.figures["first_id"] is None and "event store" in no_store.fix, no_store
    leaking = verdict(quirky_server.url, "resume")  # --resumable --leaky-events
    assert leaking.verdict == FAIL and leaking.figures["foreign"]["leaked"] >= 1, leaking
    assert leaking.figures["answers"] == 1 and "across sessions" in leaking.evidence


def test_origin_pass_and_fail(resumable_server, quirky_server):
    good = verdict(resumable_server.url, "origin")
    assert good.verdict == PASS and (good.figures["host"]["status"], good.figures["origin"]["status"]) == (421, 403), good
    bad = verdict(quirky_server.url, "origin")  # --no-host-check, on a loopback address
    assert bad.verdict == FAIL and bad.figures["local"], bad
    assert (bad.figures["host"]["status"], bad.figures["origin"]["status"]) == (200, 200)


def test_churn_pass_and_fail(resumable_server, leaking_server):
    good = verdict(resumable_server.url, "churn")
    assert good.verdict == PASS and good.figures["spike"]["delete"] == {"200": 100}, good
    assert good.figures["spike"]["failed"] == 0 and len(good.figures["after_ms"]) == 20
    bad = verdict(leaking_server.url, "churn", ProbeSettings(spike=60))  # --no-delete --max-sessions 40
    assert bad.verdict == FAIL, bad
    spike = bad.figures["spike"]
    assert spike["delete"].get("405") and spike["failed"] >= 60 - 40 - 1  # the steady session holds one place
    assert "Too many open sessions" in bad.evidence and bad.figures["fresh"]


def test_auth_pass_fail_and_not_applicable(resumable_server):
    with auth_server("metadata") as url:
        good = verdict(url, "auth")
    assert good.verdict == PASS and good.figures["metadata_named"] and good.figures["token_endpoint"].endswith("/token"), good
    with auth_server("bare") as url:
        bad = verdict(url, "auth")
    assert bad.verdict == FAIL and not bad.figures["metadata"] and "resource_metadata" in bad.fix, bad
    assert verdict(resumable_server.url, "auth").verdict == NA


def test_auth_on_the_labs_oauth_server_passes_with_client_credentials_through_a_proxy_and_names_the_challenge_without(tmp_path):
    with protected_server() as server, mitmdump(None, tmp_path / "proxy.jsonl") as proxy:
        given = mcpbench("probe", server.url, "--only", "auth", "--json", tmp_path / "given.json", "--proxy", proxy.base, *OAUTH)
        bare = mcpbench("probe", server.url, "--only", "auth", "--json", tmp_path / "bare.json")
    assert given.returncode == 0, given.stdout + given.stderr  # first contact made a session with the token
    row = json.loads((tmp_path / "given.json").read_text())["checks"][0]
    assert row["verdict"] == PASS and row["figures"]["token_endpoint"].endswith("/oauth/token"), row
    paths = {urllib.parse.urlsplit(e["url"]).path for e in read_trace(proxy.trace) if e.get("kind") == "http"}
    assert {"/mcp", "/.well-known/oauth-protected-resource/mcp", "/oauth/token"} <= paths  # the probe's requests went through it
    assert bare.returncode == 2 and "give credentials to probe it" in bare.stderr.splitlines()[-1], bare.stderr
    row = json.loads((tmp_path / "bare.json").read_text())["checks"][0]
    assert row["verdict"] == PASS and "(Bearer " in row["evidence"] and "resource_metadata=" in row["evidence"], row
    assert row["figures"]["resource_metadata"] == server.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert_no_secret(given.stdout, given.stderr, bare.stdout, files=[tmp_path / "given.json", proxy.trace])


def test_a_stateless_server_passes_sessions_and_leaves_the_session_checks_na(stateless_http_server):
    rows = verdicts(stateless_http_server.url, "sessions", "unknown", "resume", "churn", settings=ProbeSettings(sessions=5, calls=2))
    assert rows["sessions"].verdict == PASS and "keeps no sessions" in rows["sessions"].evidence, rows["sessions"]
    assert not rows["sessions"].figures["keeps_sessions"]
    assert all(rows[name].verdict == NA and "keeps no sessions" in rows[name].evidence for name in ("unknown", "resume", "churn")), rows


def test_legacy_sse_keeps_its_sessions_on_one_server_and_has_no_resumption(sse_server):
    rows = verdicts("sse+" + sse_server.url, "sessions", "resume", settings=ProbeSettings(sessions=5, calls=2))
    assert rows["sessions"].verdict == PASS and rows["sessions"].figures["broken"] == 0, rows["sessions"]
    assert rows["resume"].verdict == NA and "legacy" in rows["resume"].evidence
