"""Blocking HTTP for the clients' own requests (discovery, tokens) and the replayer's connections,
through a proxy when one applies.

`http.client` with sockets: blocking in the replayer and the forwarder, cooperative in a Locust
process (gevent patches the socket module there), so one shell serves every client stack.

    conn = connection(url, timeout=10, proxy=settings.route(url))
    conn.request("POST", target(url, proxy), body, {**headers, **proxy_headers(url, proxy)})
"""

import http.client
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcpbench.auth.proxy import Proxy
from mcpbench.protocol.errors import TargetError

# A metadata document or a token answer is small; more than this is no OAuth answer.
MAX_ANSWER_BYTES = 1024 * 1024
# How long a discovery or token request may take, connect included.
FETCH_TIMEOUT = 10.0


def connection(url: str, timeout: float | None, proxy: Proxy | None = None) -> http.client.HTTPConnection:
    """An unopened connection for requests to `url`'s origin: to the host, or to `proxy` (a `CONNECT`
    tunnel for https, whose certificate is then checked against the host's name)."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    if proxy is None:
        cls = http.client.HTTPSConnection if https else http.client.HTTPConnection
        return cls(parts.hostname, parts.port, timeout=timeout)
    if not https:
        return http.client.HTTPConnection(proxy.host, proxy.port, timeout=timeout)
    conn = http.client.HTTPSConnection(proxy.host, proxy.port, timeout=timeout)
    tunnel = {"Proxy-Authorization": proxy.authorization} if proxy.authorization else None
    conn.set_tunnel(parts.hostname, parts.port or 443, headers=tunnel)
    return conn


def target(url: str, proxy: Proxy | None = None) -> str:
    """The request-target of a request to `url`: its path and query, or the whole URL when a plain
    http request goes through a proxy (RFC 9112 §3.2.2, absolute-form)."""
    parts = urlsplit(url)
    if proxy is not None and parts.scheme == "http":
        return url.split("#", 1)[0]
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def proxy_headers(url: str, proxy: Proxy | None) -> dict[str, str]:
    """`Proxy-Authorization` for a plain http request through a proxy with credentials (a tunnel
    sends it with its `CONNECT` instead)."""
    if proxy is None or proxy.authorization is None or urlsplit(url).scheme != "http":
        return {}
    return {"proxy-authorization": proxy.authorization}


def failure(url: str, exc: BaseException, proxy: Proxy | None = None) -> str:
    """Why a connection to `url` failed, in one line naming the proxy when it went through one."""
    if isinstance(exc, ssl.SSLCertVerificationError):  # the usual fix is not obvious from OpenSSL's words
        return (f"cannot connect to {url}: its certificate is not trusted ({exc.verify_message}); "
                "SSL_CERT_FILE=FILE trusts the CAs in that PEM file")
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    if proxy is not None:
        return f"cannot connect to {url} through the proxy {proxy.url}: {reason}"
    return f"cannot connect to {url}: {reason}"


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]  # names lower case
    body: bytes

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")


def fetch(method: str, url: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
          proxy: Proxy | None = None, timeout: float = FETCH_TIMEOUT, head_only: bool = False) -> Answer:
    """One request and its whole answer (at most `MAX_ANSWER_BYTES` of body; none with `head_only`,
    for an answer that may be a stream that never ends).

    Raises:
        TargetError: `url` (or the proxy) cannot be reached, or the answer is not HTTP.
    """
    conn = connection(url, timeout, proxy)
    try:
        conn.request(method, target(url, proxy), body, {**(headers or {}), **proxy_headers(url, proxy)})
        resp = conn.getresponse()
        data = b"" if head_only else resp.read(MAX_ANSWER_BYTES)
        return Answer(resp.status, {name.lower(): value for name, value in resp.getheaders()}, data)
    except (OSError, http.client.HTTPException, socket.timeout) as exc:
        raise TargetError(failure(url, exc, proxy)) from None
    finally:
        conn.close()


__all__ = ["Answer", "FETCH_TIMEOUT", "connection", "failure", "fetch", "proxy_headers", "target"]
