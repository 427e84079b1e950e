"""Parse the target strings shared by `replay` and `load`.

Three forms::

    stdio:CMD ARGS...            a child process speaking newline-delimited JSON-RPC
    http://host:port/mcp         Streamable HTTP (https too)
    sse+http://host:port/sse     legacy HTTP+SSE (sse+https too)

Pure: no I/O, no imports beyond the standard library and the error tree.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcpbench.protocol.errors import BadTargetError, TargetError
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP

__all__ = ["Target", "TargetError", "parse_target"]


@dataclass(frozen=True)
class Target:
    """Where to send traffic: `transport` plus either `url` (HTTP kinds) or `argv` (stdio)."""

    transport: str
    url: str | None = None
    argv: tuple[str, ...] = ()

    @property
    def host(self) -> str | None:
        return urlsplit(self.url).hostname if self.url else None

    @property
    def port(self) -> int | None:
        if not self.url:
            return None
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    def __str__(self) -> str:
        if self.transport == STDIO:
            return "stdio:" + shlex.join(self.argv)
        if self.transport == LEGACY_SSE:
            return "sse+" + (self.url or "")
        return self.url or ""


def parse_target(s: str) -> Target:
    """`"stdio:python srv.py"`, `"http://h:1/mcp"` or `"sse+http://h:1/sse"` -> `Target`.

    Raises `BadTargetError` (a `TargetError`) with a one-line message for anything else.
    """
    text = (s or "").strip()
    if not text:
        raise BadTargetError("empty target (expected stdio:CMD, http(s)://HOST/mcp or sse+http(s)://HOST/sse)")
    if text.startswith("stdio:"):
        try:
            argv = tuple(shlex.split(text[len("stdio:"):]))
        except ValueError as err:
            raise BadTargetError(f"target {s!r}: cannot split the command: {err}") from None
        if not argv:
            raise BadTargetError(f"target {s!r}: stdio: needs a command, e.g. stdio:python server.py")
        return Target(STDIO, argv=argv)
    scheme, sep, _rest = text.partition("://")
    if not sep:
        raise BadTargetError(
            f"unknown target {s!r} (expected stdio:CMD, http(s)://HOST/mcp or sse+http(s)://HOST/sse)"
        )
    scheme = scheme.lower()
    if scheme in ("http", "https"):
        transport, url = STREAMABLE_HTTP, text
    elif scheme in ("sse+http", "sse+https"):
        transport, url = LEGACY_SSE, text[len("sse+"):]
    else:
        raise BadTargetError(
            f"unknown transport scheme {scheme!r} in target {s!r} (expected http, https, sse+http, sse+https or stdio:)"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - validates the port
    except ValueError as err:
        raise BadTargetError(f"target {s!r}: {err}") from None
    if not parts.hostname:
        raise BadTargetError(f"target {s!r} has no host")
    return Target(transport, url=url)
