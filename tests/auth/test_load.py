"""Load runs against the protected reference server (`lab serve --auth oauth`): discovery, renewal mid-run,
a fixed token, shared tokens, and no credentials at all (real Locust processes)."""

import csv
import urllib.error
import urllib.request

import orjson
import pytest

from tests.auth.helpers import CLIENT_ID, CLIENT_SECRET, OAUTH, SECRET_ENV, TOKEN_ENV, assert_no_secret, mcpbench, protected_server

pytestmark = pytest.mark.slow

MIX = "mix:\n  - {call: tools/call, tool: echo, arguments: {text: hi}}\n  - {call: tools/list}\n"


def run(tmp_path, target, *options, users=2, duration="4s", extra=""):
    tmp_path.mkdir(exist_ok=True)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(f"target: {target}\n{MIX}users: {users}\nspawn_rate: 20\nduration: {duration}\nthink_time: 0.05\n"
                        f"thresholds: ['fail_ratio < 0.01']\n{extra}")
    out = tmp_path / "out"
    done = mcpbench("load", scenario, "--out", out, *options)
    rows = {}
    if (out / "locust_stats.csv").exists():
        with open(out / "locust_stats.csv", newline="") as handle:
            rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(handle) if r["Name"] != "Aggregated"}
    return done, out, rows


def count(rows, kind, name) -> int:
    return int(rows[(kind, name)]["Request Count"]) if (kind, name) in rows else 0


def test_tokens_that_expire_mid_run_are_renewed_with_no_failed_call(tmp_path):
    # 120 calls, counted, not timed: each user's ~60 calls with 50 ms of thought before each span 3 s or
    # more however busy the machine (a 5 s run lost most of its time to Locust's start-up there); 30 s the bound
    with protected_server(lifetime="1500ms") as server:
        done, out, rows = run(tmp_path, server.url, *OAUTH, duration="30s", extra="calls: 120\n")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["total"]["failures"] == 0 and count(rows, "streamable-http", "tools/call echo") > 10
    # one discovery for the process; each user's token renewed before each expiry (20 % ahead: every 1.2 s)
    assert [count(rows, "oauth", name) for name in ("challenge", "resource metadata", "server metadata")] == [1, 1, 1]
    assert count(rows, "oauth", "token") >= 2 * 3
    assert_no_secret(done.stdout, done.stderr, files=[out])


def test_a_fixed_token_and_the_scenarios_own_headers(tmp_path):
    with protected_server() as server:
        done, out, rows = run(tmp_path, server.url, duration="2s",
                             extra=f"headers: ['X-Tenant: acme']\nauth: {{bearer_token_env: {TOKEN_ENV}}}\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [key for key in rows if key[0] == "oauth"] and count(rows, "streamable-http", "initialize") == 2
    written = orjson.loads((out / "scenario.json").read_bytes())["client"]
    assert written["headers"] == ["X-Tenant: (given)"] and written["bearer_token_env"] == TOKEN_ENV
    assert_no_secret(done.stdout, done.stderr, files=[out])


def test_one_token_per_user_or_one_shared_by_a_process_also_over_legacy_sse(tmp_path):
    with protected_server("sse") as server:
        each, _, each_rows = run(tmp_path / "each", "sse+" + server.url, *OAUTH, users=3, duration="2s")
        shared, _, shared_rows = run(tmp_path / "shared", "sse+" + server.url, *OAUTH, "--oauth-shared", users=3, duration="2s")
    for done in (each, shared):
        assert done.returncode == 0, done.stdout + done.stderr
    assert count(each_rows, "oauth", "token") == 3 and count(shared_rows, "oauth", "token") == 1
    assert count(shared_rows, "sse", "tools/call echo") > 3


def test_without_credentials_every_step_fails_as_auth_required_and_the_challenge_is_named(tmp_path):
    with protected_server() as server:
        done, out, rows = run(tmp_path, server.url, duration="2s")
    assert done.returncode == 1, done.stdout + done.stderr
    metadata = server.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert f"auth-required: HTTP 401 (Bearer error=invalid_token resource_metadata={metadata})" in done.stdout
    assert "FAIL  fail_ratio < 0.01" in done.stdout
    samples = [orjson.loads(line) for line in (out / "samples.jsonl").read_bytes().splitlines()]
    assert samples and all(s["failure"] == "auth-required" for s in samples)
    assert all(s["challenge"]["resource_metadata"] == metadata for s in samples)


def test_a_401_mid_run_renews_the_token_once_and_sends_again_once(tmp_path):
    """Tokens of another server's authorization server: each refused step renews once and goes again,
    once; then it fails as auth-required (no loop of renewals)."""
    log = tmp_path / "requests.jsonl"
    with protected_server() as issuer, protected_server(extra=["--request-log", str(log)]) as server:
        token_url = issuer.url.replace("/mcp", "/oauth/token")
        done, out, rows = run(tmp_path, server.url, "--oauth-token-url", token_url, *OAUTH[1:], users=1, duration="2s")
    assert done.returncode == 1, done.stdout + done.stderr
    samples = [orjson.loads(line) for line in (out / "samples.jsonl").read_bytes().splitlines()]
    steps = [s for s in samples if s["type"] != "oauth"]
    assert steps and all(s["failure"] == "auth-required" for s in steps), steps
    tokens = [s for s in samples if s["type"] == "oauth" and s["step"] == "token"]
    assert len(tokens) == count(rows, "oauth", "token")
    assert len(tokens) - (1 + len(steps)) in (0, 1)  # the user's first, one per refusal (and the cut step's)
    posts = [line for line in map(orjson.loads, log.read_bytes().splitlines()) if line["method"] == "POST"]
    # the preflight's two (refused, renewed, sent again) before Locust starts; then each step sent twice, before
    # and after its renewal; and a last one, unsampled, that the run's end may cut short after one or two
    assert len(posts) - 2 * len(steps) in (2, 3, 4), (len(posts), len(steps))
    assert_no_secret(done.stdout, done.stderr, files=[out])


def test_a_delete_refused_for_a_token_expired_on_its_way_renews_it_and_goes_again():
    """A token renewed ahead of its expiry can still expire before the server reads it (a busy machine):
    the session's DELETE, refused with a 401, renews the token and goes again, once, as every step does."""
    import gevent

    from mcpbench.auth.oauth import OAuthConfig, TokenSource
    from mcpbench.auth.options import ClientAccess
    from mcpbench.auth.proxy import ProxySettings
    from tests.support.faults import wait_for
    from tests.support.load_client import TIMEOUT, Run

    with protected_server(lifetime="1s") as server:
        access = ClientAccess({}, ProxySettings.read({}), OAuthConfig(CLIENT_ID, SECRET_ENV, discover=True), CLIENT_SECRET,
                              resource_url=server.url)
        # This client's clock stands still, so by it the token is never due: the server's expiry alone decides.
        tokens = TokenSource(access.oauth, CLIENT_SECRET, access.discovery(), clock=lambda: 0.0)
        run = Run(server.url, None)
        run.client.tokens = tokens

        def refused(authorization: str) -> bool:
            request = urllib.request.Request(server.url, method="POST", data=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
                                             headers={"authorization": authorization, "content-type": "application/json",
                                                      "accept": "application/json, text/event-stream"})
            try:
                urllib.request.urlopen(request, timeout=TIMEOUT).close()
            except urllib.error.HTTPError as exc:
                return exc.code == 401
            return False

        before = []

        def session() -> None:
            try:
                assert run.client.start_session(), run.steps
                wait_for(lambda: refused(tokens.token.header), TIMEOUT, "the server refusing the session's token")
                before.append(tokens.requests)
            finally:
                run.client.end_session()
                run.client.close_transport()

        greenlet = gevent.spawn(session)
        greenlet.join(timeout=3 * TIMEOUT)
        assert greenlet.ready() and greenlet.exception is None, greenlet.exception
    (delete,) = [step for step in run.steps if step["name"] == "DELETE"]
    assert delete["exception"] is None, delete  # not auth-required: renewed once and sent again
    assert tokens.requests == before[0] + 1
