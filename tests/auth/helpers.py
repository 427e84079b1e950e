"""Peers for the credential tests: the reference server protected (`lab serve --auth`), a page that is no
OAuth, the mcpbench commands run with credentials in their environment, and the secrets to look for."""

import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support.http_thread import QuietHandler, serving
from tests.support.servers import HOST, REPO_ROOT, RunningServer, reference_server

CLIENT_ID = "mcpbench-lab"
# Fresh per test session, so that finding one in an output cannot be a coincidence.
CLIENT_SECRET = "client-secret-" + secrets.token_hex(8)
FIXED_TOKEN = "fixed-token-" + secrets.token_hex(8)
SECRET_ENV, TOKEN_ENV = "MCPBENCH_TEST_CLIENT_SECRET", "MCPBENCH_TEST_TOKEN"
OAUTH = ["--oauth-discover", "--oauth-client-id", CLIENT_ID, "--oauth-client-secret-env", SECRET_ENV]
# A command's run: well above a short replay or load, far below the suite's per-test limit.
COMMAND_TIMEOUT = 120


def credentials_env(**more: str) -> dict[str, str]:
    """This process's environment with the test's secrets in their variables (and `more`)."""
    return {**os.environ, SECRET_ENV: CLIENT_SECRET, TOKEN_ENV: FIXED_TOKEN, **more}


@contextlib.contextmanager
def protected_server(transport: str = "streamable-http", *, mode: str = "oauth", lifetime: str = "1h",
                     extra: list[str] = ()) -> Iterator[RunningServer]:
    """`mcpbench lab serve --auth MODE` accepting `CLIENT_SECRET` and `FIXED_TOKEN`, tokens lasting `lifetime`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET_ENV, CLIENT_SECRET)
        patch.setenv(TOKEN_ENV, FIXED_TOKEN)
        args = ["--auth", mode, "--client-secret-env", SECRET_ENV, "--token-env", TOKEN_ENV, "--token-lifetime", lifetime, *extra]
        with reference_server(transport, extra_args=args) as server:
            yield server


def mcpbench(*args: object, env: dict[str, str] | None = None, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess:
    """`python -m mcpbench ARGS` with the test's secrets in its environment."""
    return subprocess.run([sys.executable, "-m", "mcpbench", *map(str, args)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env or credentials_env())


def assert_no_secret(*texts: str, files: list[Path] = ()) -> None:
    """Neither secret is in any of `texts` or `files` (every file of a folder, for a folder)."""
    paths = [p for f in files for p in ([f] if f.is_file() else sorted(f.rglob("*")) if f.is_dir() else []) if p.is_file()]
    for where, text in [*((f"text {i}", t) for i, t in enumerate(texts)), *((str(p), p.read_text(errors="replace")) for p in paths)]:
        assert CLIENT_SECRET not in text and FIXED_TOKEN not in text, f"a secret in {where}"


def handshake_only(trace: Path, out: Path) -> Path:
    """`trace` with its messages cut after the handshake: a mock of it forwards every call."""
    kept = []
    for line in trace.read_bytes().splitlines(keepends=True):
        event = orjson.loads(line)
        msg = event.get("msg") if event.get("kind") == "message" else None
        if isinstance(msg, dict) and msg.get("method") not in (None, "initialize", "notifications/initialized"):
            break
        kept.append(line)
    out.write_bytes(b"".join(kept))
    return out


class _NotOAuth(QuietHandler):
    """Answers like a deployment behind a sign-in page: 401 naming metadata that is an HTML page."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/mcp"):
            port = self.server.server_address[1]
            self._page(401, {"www-authenticate": f'Bearer resource_metadata="http://{HOST}:{port}/metadata"'})
        else:
            self._page(200)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self._page(200)

    def _page(self, status: int, headers: dict | None = None) -> None:
        body = b"<html><head><title>Sign in to Example Corp</title></head><body>...</body></html>"
        self.reply(status, {"content-type": "text/html", **(headers or {})}, body)


@contextlib.contextmanager
def sign_in_page() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 whose every page is HTML; yields its base URL."""
    with serving(_NotOAuth) as port:
        yield f"http://{HOST}:{port}"
