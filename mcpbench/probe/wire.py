"""The probe's HTTP options and its one raw request, over the transport's exchange shell.

A check that speaks MCP does it through a session (`sessions.py`) on `transport.exchange`'s
`ExchangeTransport`; a check that asks something else of the endpoint (a bare `GET`, a request with
a foreign `Origin`) makes one raw request here::

    wire = Wire("http://127.0.0.1:8000/mcp", ProbeOptions(access=client_options.resolve(url)))
    reply = wire.request("GET", headers, deadline=deadline)     # the head: status, headers, instance
    for chunk, ts in reply.chunks(deadline): ...                 # the body, b"" at its end

Each request carries the user's headers and an OAuth token fetched or renewed as it falls due, and
goes through the user's proxy when one applies. Every read is bounded by a deadline
(`time.monotonic()`), so no check waits longer than its time bound.
"""

import http.client
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from mcpbench.auth.options import ClientAccess
from mcpbench.auth.proxy import Proxy
from mcpbench.protocol.errors import McpbenchError
from mcpbench.protocol.http import INSTANCE
from mcpbench.transport.base import Sink
from mcpbench.transport.exchange import ExchangeError, ExchangeTransport, HttpReply, exchange, left

# The one error of an exchange (`unreachable`, `timed_out`, `closed`), by the name the checks know.
WireError = ExchangeError


@dataclass(frozen=True, slots=True)
class ProbeOptions:
    """What every request of the probe carries, and how long one may take.

    `access`: the user's headers, OAuth tokens and proxies (`auth.options`, as replay and load have
    them); `instance_header`: the response header that names the instance that served it;
    `timeout`: seconds one request may take.
    """

    access: ClientAccess = field(default_factory=ClientAccess.none)
    timeout: float = 5.0
    instance_header: str = INSTANCE

    def headers(self) -> dict[str, str]:
        """The user's headers for a request sent now, with a token that is not due (fetched if needed).

        Raises:
            WireError: no token can be had (the token endpoint refused, or cannot be reached).
        """
        try:
            return self.access.headers_now()
        except McpbenchError as exc:
            raise WireError(f"no credentials to send: {exc}") from None

    def proxy(self, url: str) -> Proxy | None:
        """The proxy a request to `url` goes through, or None."""
        return self.access.proxies.route(url)


def each(func, items, workers: int) -> list:
    """`func` over `items` on up to `workers` threads, results in order. Interrupted (Ctrl-C), what has
    not started is dropped; what runs ends within its own deadline."""
    pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="mcpbench-probe")
    try:
        return list(pool.map(func, items))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class Wire:
    """One HTTP endpoint with the probe's options: its sessions' transports, and raw requests."""

    def __init__(self, url: str, options: ProbeOptions) -> None:
        self.url = url
        self.options = options
        self.host = urlsplit(url).hostname or ""

    def transport(self, sink: Sink) -> ExchangeTransport:
        """A session's transport: one exchange at a time, with these options."""
        options = self.options
        return ExchangeTransport(self.url, sink, headers_now=options.headers, proxy=options.proxy(self.url),
                                 timeout=options.timeout, instance_header=options.instance_header)

    def request(
        self,
        method: str,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        deadline: float,
        conn: http.client.HTTPConnection | None = None,
        url: str | None = None,
        extra: Mapping[str, str] | None = None,
        bare: bool = False,
    ) -> HttpReply:
        """Send one request and wait for its head (`transport.exchange.exchange`).

        `extra` headers go last (they win); `bare` leaves the probe's own headers (credentials) out.

        Raises:
            WireError: no connection (`unreachable`), or no answer before `deadline`.
        """
        url = url or self.url
        sent = {**({} if bare else self.options.headers()), **(headers or {}), **(extra or {})}
        return exchange(url, method, sent, body, deadline=deadline, proxy=self.options.proxy(url), timeout=self.options.timeout,
                        instance_header=self.options.instance_header, conn=conn, named=self.url)


__all__ = ["ProbeOptions", "Wire", "WireError", "each", "left"]
