"""`mcpbench probe` given what it cannot use: one line naming it, exit 2 (input) or 3 (the endpoint)."""

import socket

import pytest

from mcpbench.probe.run import NAMES
from tests.hostile.helpers import EXIT_ENVIRONMENT, EXIT_INPUT, assert_clean_failure, run
from tests.hostile.hostile_peers import not_mcp_server
from tests.probe.helpers import auth_server
from tests.support.servers import HOST, free_port


@pytest.mark.parametrize(("args", "mentions"), [
    (["--only", "versions,sticky"], ["--only", "'sticky'", "versions, sessions"]),
    (["--skip", "everything"], ["--skip", "'everything'"]),
    (["--idle", "1s"], ["--idle 1s", "2 s to 1800 s"]),
    (["--idle", "soon"], ["--idle", "'soon'"]),
    (["--timeout", "60s"], ["--timeout 60s"]),
    (["--progress-tool", "slow {steps: 2}"], ["--progress-tool", "not JSON"]),
    (["--progress-tool", "slow [1]"], ["--progress-tool", "JSON object"]),
    (["--direct", "stdio:server"], ["stdio:server"]),
])
def test_a_bad_option_is_one_line_before_any_contact(args, mentions):
    url = f"http://{HOST}:{free_port()}/mcp"  # nothing listens: a contact would be exit 3, not 2
    assert_clean_failure(run(["probe", url, *args]), EXIT_INPUT, *mentions)


@pytest.mark.parametrize("url", ["stdio:python server.py", "ftp://example.com/mcp", "http://"])
def test_a_url_that_is_no_http_endpoint_is_input(url):
    assert_clean_failure(run(["probe", url]), EXIT_INPUT, url)


def test_nothing_listening_is_the_environment():
    url = f"http://{HOST}:{free_port()}/mcp"
    assert_clean_failure(run(["probe", url]), EXIT_ENVIRONMENT, url, "refused")


@pytest.mark.parametrize("path", ["/200", "/404", "/500"])
def test_a_web_page_is_not_mcp(path):
    with not_mcp_server() as base:
        line = assert_clean_failure(run(["probe", base + path]), EXIT_ENVIRONMENT, base + path, "not an MCP endpoint")
    assert "a web page" in line and path[1:] in line


def test_a_server_that_never_answers_is_cut_at_the_timeout():
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind((HOST, 0))
        silent.listen()
        url = f"http://{HOST}:{silent.getsockname()[1]}/mcp"
        assert_clean_failure(run(["probe", url, "--timeout", "1s"], timeout=30), EXIT_ENVIRONMENT, url, "no answer within 1 s")


def test_a_server_that_wants_credentials_shows_its_auth_shape_and_exits_2():
    with auth_server("metadata") as url:
        result = run(["probe", url])
    assert result.returncode == EXIT_INPUT and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == f"mcpbench: {url} answers HTTP 401: give credentials to probe it (only its authentication shape was checked)"
    rows = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()[2:] if line[:1].strip()}
    assert rows.pop("auth") == "pass" and set(rows.values()) == {"n/a"} and len(rows) == len(NAMES) - 2  # idle is opt-in
