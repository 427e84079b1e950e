"""Credentials and proxies that cannot be used: one line naming the header, variable, file or URL, exit 2
for the input and 3 for the environment, and no secret in any message (real processes)."""

import pytest

from tests.auth.helpers import (
    CLIENT_ID,
    CLIENT_SECRET,
    OAUTH,
    SECRET_ENV,
    assert_no_secret,
    credentials_env,
    mcpbench,
    protected_server,
    sign_in_page,
)
from tests.support.servers import HOST, free_port

# A port nothing listens on: its proxy cannot be reached.
CLOSED = f"http://user:{CLIENT_SECRET}@{HOST}:{{port}}"


def one_line(done, status: int, *fragments: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == status, done.stdout + done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert_no_secret(done.stdout, done.stderr)


@pytest.fixture(scope="module")
def oauth_server():
    with protected_server() as server:
        yield server


@pytest.mark.parametrize(("options", "status", "named"), [
    (["--header", f"X-Api-Key {CLIENT_SECRET}"], 2, "--header 'X-Api-Key': expected 'Name: value'"),
    (["--header", "X-Api-Key: $MCPBENCH_UNSET_VARIABLE"], 2, "environment variable MCPBENCH_UNSET_VARIABLE is not set"),
    (["--header", "X-Api-Key: @/nonexistent/api.key"], 2, "cannot read /nonexistent/api.key"),
    (["--bearer-token-env", "MCPBENCH_UNSET_VARIABLE"], 2, "--bearer-token-env: environment variable MCPBENCH_UNSET_VARIABLE"),
    (["--proxy", f"socks5://user:{CLIENT_SECRET}@{HOST}:1080"], 2, "--proxy socks5://127.0.0.1:1080: only http:// proxies"),
    (["--oauth-discover", "--oauth-client-id", CLIENT_ID], 2, "--oauth-*: client_secret_env is required"),
], ids=["no-colon", "unset-variable", "unreadable-file", "unset-token-variable", "bad-proxy", "oauth-incomplete"])
def test_unusable_options_are_one_line_and_exit_2(recordings, oauth_server, options, status, named):
    one_line(mcpbench("replay", recordings["legacy"], "--target", oauth_server.url, *options), status, named)


def test_a_proxy_that_cannot_be_reached_is_named_and_exit_3(recordings, oauth_server, tmp_path):
    proxy = CLOSED.format(port=free_port())
    done = mcpbench("replay", recordings["legacy"], "--target", oauth_server.url, "--proxy", proxy)
    assert done.returncode == 3 and "through the proxy http://127.0.0.1:" in done.stdout + done.stderr
    assert_no_secret(done.stdout, done.stderr)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"target: {oauth_server.url}\nmix: [{{call: tools/list}}]\n")
    one_line(mcpbench("load", scenario, "--out", tmp_path / "out", env=credentials_env(HTTP_PROXY=proxy)), 3,
             "cannot reach the proxy http://127.0.0.1:", f"for {oauth_server.url}")


def test_a_wrong_secret_is_refused_in_one_line_exit_2(recordings, oauth_server):
    env = credentials_env(**{SECRET_ENV: "wrong-" + CLIENT_SECRET})
    done = mcpbench("replay", recordings["legacy"], "--target", oauth_server.url, *OAUTH, env=env)
    one_line(done, 2, "token request to", "/oauth/token refused: invalid_client")
    assert "wrong-" not in done.stderr


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_a_token_endpoint_and_metadata_that_are_no_oauth_are_exit_3(recordings, tmp_path):
    with sign_in_page() as page:
        for options, named in (
            (["--oauth-token-url", f"{page}/token", "--oauth-client-id", CLIENT_ID, "--oauth-client-secret-env", SECRET_ENV],
             f"token_endpoint {page}/token: no OAuth answer (not JSON): text/html 'Sign in to Example Corp'"),
            (OAUTH, f"protected resource metadata {page}/metadata: not JSON (text/html)"),
        ):
            one_line(mcpbench("replay", recordings["legacy"], "--target", f"{page}/mcp", *options), 3, named)
        scenario = tmp_path / "s.yaml"
        scenario.write_text(f"target: {page}/mcp\nmix: [{{call: tools/list}}]\n")
        one_line(mcpbench("load", scenario, "--out", tmp_path / "out", *OAUTH), 3, f"{page}/metadata: not JSON")
