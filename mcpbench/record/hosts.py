"""Which `Host` a recorded upstream gets (reverse mode), free of mitmproxy's own rewrite.

mitmproxy in reverse mode rewrites `Host` to the upstream's address unless `keep_host_header` is
set, before any addon sees the request: a trace would then record the rewritten value, and an
upstream that defends against DNS rebinding by checking `Host` (the official SDKs do, bound to
loopback) would accept through the recorder a request it refuses directly. The recorder therefore
keeps mitmproxy's hands off (`keep_host_header`), records what the client sent, and then sets the
header itself as `mcpbench_host_header` says:

- `client`: the client's `Host`, always;
- `upstream`: the upstream's address (mitmproxy's default behaviour);
- `auto` (the default): the client's for a loopback upstream, the upstream's otherwise. A loopback
  upstream is a local server whose Host check allows any port of 127.0.0.1/localhost/[::1] (the
  recorder's own address passes) and must refuse what it refuses directly; a remote upstream may
  route by `Host` (virtual hosting, a CDN) and would not know the recorder's name.
"""

import ipaddress

from mcpbench.proxies.host import keep_client_host

HOST_HEADER_MODES = ("auto", "client", "upstream")
CLIENT, UPSTREAM, AUTO = "client", "upstream", "auto"


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HostHeader:
    """The addon's part that sets an upstream's `Host` (see the module docstring)."""

    def __init__(self) -> None:
        self.mode = AUTO
        self._loopback: dict[str, bool] = {}  # upstream host -> loopback? (a few per proxy)

    def configure(self, options) -> None:
        """Read `mcpbench_host_header`; in reverse mode take the rewrite over from mitmproxy."""
        self.mode = getattr(options, "mcpbench_host_header", AUTO)
        keep_client_host(options)

    def apply(self, flow) -> None:
        """Set the upstream's `Host` on a reverse-mode request, unless the client's is to be kept."""
        if self.mode == CLIENT:
            return
        from mitmproxy.proxy.mode_specs import ReverseMode

        if not isinstance(flow.client_conn.proxy_mode, ReverseMode):
            return  # a regular proxy's client names its upstream itself
        request = flow.request
        host = request.data.host
        if self.mode == AUTO:
            local = self._loopback.get(host)
            if local is None:
                local = self._loopback[host] = is_loopback(host)
            if local:
                return
        from mitmproxy.net.http import url

        request.host_header = url.hostport(request.scheme, host, request.data.port)


__all__ = ["AUTO", "CLIENT", "HOST_HEADER_MODES", "HostHeader", "UPSTREAM", "is_loopback"]
