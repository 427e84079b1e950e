"""Which HTTP proxy a request goes through: `--proxy URL`, else `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY`,
minus `NO_PROXY`, read as curl and requests read them.

- The variables' lower-case spelling wins over the upper-case one (`https_proxy` over
  `HTTPS_PROXY`); `HTTP_PROXY` in upper case is ignored inside a CGI request (`REQUEST_METHOD`
  set: httpoxy), as both do. `ALL_PROXY` serves any scheme without a variable of its own.
- `NO_PROXY` is a comma-separated list: `*` (no proxy at all), a domain (`example.com` and its
  subdomains; a leading `.` or `*.` alike), `host:port`, an IP address or a CIDR block.
  It applies to `--proxy` too, as in curl.
- A proxy is `http://[user:password@]host[:port]` (no scheme: http; no port: 1080, curl's).
  An http target goes to it in absolute form; an https target through a `CONNECT` tunnel.
"""

import base64
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from mcpbench.protocol.errors import CredentialError

# curl's default proxy port (requests has none: a port is usually given).
DEFAULT_PORT = 1080


@dataclass(frozen=True, slots=True)
class Proxy:
    """One HTTP proxy: where to connect, and the credentials for `Proxy-Authorization`, if any."""

    host: str
    port: int
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The proxy as a message names it: never its credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def authorization(self) -> str | None:
        """The `Proxy-Authorization` value (Basic, RFC 7617), or None without credentials."""
        if self.username is None:
            return None
        pair = f"{self.username}:{self.password or ''}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")


def parse_proxy(text: str, *, where: str = "--proxy") -> Proxy:
    """`http://[user:password@]host[:port]` or `host:port` -> `Proxy`.

    Raises:
        CredentialError: not such a URL (another scheme, no host, a bad port); the message hides credentials.
    """
    raw = str(text).strip()
    value = raw if "://" in raw else f"http://{raw}"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise CredentialError(f"{where} {hidden(raw)}: not a proxy URL (expected http://HOST:PORT)") from None
    if parts.scheme != "http":
        raise CredentialError(f"{where} {hidden(raw)}: only http:// proxies are supported (got {parts.scheme}://)")
    if not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise CredentialError(f"{where} {hidden(raw)}: not a proxy URL (expected http://HOST:PORT)")
    username = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return Proxy(parts.hostname, port or DEFAULT_PORT, username, password)


def hidden(text: str) -> str:
    """A proxy URL as a message or a results file may show it: `user:password@` dropped."""
    scheme, sep, rest = text.rpartition("://")
    rest = rest.rpartition("@")[2]
    return f"{scheme}{sep}{rest}"


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """The proxy of each request: `explicit` (`--proxy`) or the environment's, and the `NO_PROXY` list."""

    explicit: Proxy | None = None
    by_scheme: dict[str, Proxy] = field(default_factory=dict)  # "http", "https", "all"
    no_proxy: tuple[str, ...] = ()

    @classmethod
    def read(cls, environ: Mapping[str, str], explicit: str | None = None) -> "ProxySettings":
        """The settings of this environment and `--proxy`.

        Raises:
            CredentialError: a proxy URL that cannot be used (naming its variable or option).
        """
        chosen: dict[str, tuple[str, str]] = {}
        cgi = "REQUEST_METHOD" in environ
        for name, value in environ.items():  # upper case first, so that lower case overwrites it
            lower = name.lower()
            if lower in ("http_proxy", "https_proxy", "all_proxy") and value.strip() and name != lower:
                if not (cgi and name == "HTTP_PROXY"):
                    chosen[lower] = (name, value)
        for name, value in environ.items():
            if name in ("http_proxy", "https_proxy", "all_proxy") and value.strip():
                chosen[name] = (name, value)
        by_scheme = {key.removesuffix("_proxy"): parse_proxy(value, where=name) for key, (name, value) in chosen.items()}
        no_proxy = environ.get("no_proxy") or environ.get("NO_PROXY") or ""
        entries = tuple(entry.strip().lower() for entry in no_proxy.split(",") if entry.strip())
        return cls(parse_proxy(explicit) if explicit else None, by_scheme, entries)

    def route(self, url: str) -> Proxy | None:
        """The proxy a request to `url` goes through, or None (straight to the host)."""
        parts = urlsplit(url)
        proxy = self.explicit or self.by_scheme.get(parts.scheme) or self.by_scheme.get("all")
        if proxy is None or self.bypassed(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)):
            return None
        return proxy

    def bypassed(self, host: str, port: int) -> bool:
        """Whether `NO_PROXY` sends `host:port` straight (curl's tail matching, requests' CIDR blocks)."""
        host = host.lower().strip("[]")
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            address = None
        for entry in self.no_proxy:
            if entry == "*":
                return True
            name, port_text = _entry_port(entry)
            if port_text is not None and port_text != str(port):
                continue
            if address is not None:
                try:
                    if address in ipaddress.ip_network(name, strict=False):
                        return True
                except ValueError:
                    pass
                continue
            name = name.removeprefix("*").removeprefix(".")
            if name and (host == name or host.endswith("." + name)):
                return True
        return False

    @property
    def active(self) -> bool:
        return self.explicit is not None or bool(self.by_scheme)


def _entry_port(entry: str) -> tuple[str, str | None]:
    """`host:port`, `[v6]:port`, a bare IPv6 address or a CIDR block -> (name, port or None)."""
    if entry.startswith("["):
        name, _, rest = entry[1:].partition("]")
        return name, rest[1:] if rest.startswith(":") else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        return name, port if port.isdigit() else None
    return entry, None


__all__ = ["DEFAULT_PORT", "Proxy", "ProxySettings", "hidden", "parse_proxy"]
