"""OAuth 2.1 client credentials for a machine client: the settings, and the tokens they get.

    auth:
      oauth:
        discover: true                # follow the server's 401 challenge (RFC 9728, RFC 8414)
        # token_url: https://auth.example.com/token   (instead of discover)
        client_id: load-tester
        client_secret_env: MCP_CLIENT_SECRET          # the secret's environment variable
        scope: mcp
        resource: https://mcp.example.com/mcp         # RFC 8707 (default: the discovered or target URL)
        audience: mcp-api                             # for servers that take `audience` instead
        shared: false                                 # one token per user (true: per load process)

`TokenSource` is the I/O shell over `protocol/auth.py`: it finds the token endpoint once
(`Discovery`, shared by the sources of a process), fetches a token when there is none or the
current one is due (`Token.due`), and fetches a new one after a 401 (`renew`). Each request
it makes is reported to `on_request` (the load users make each a sample of its own).
"""

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mcpbench.auth.fetch import Answer, fetch
from mcpbench.auth.proxy import ProxySettings
from mcpbench.protocol import auth
from mcpbench.protocol.errors import CredentialError, McpbenchError
from mcpbench.protocol.http import AUTHENTICATE

KEYS = ("token_url", "discover", "client_id", "client_secret_env", "scope", "audience", "resource", "shared")

# The names of the requests a token source reports (`on_request`): one row each in Locust's statistics.
CHALLENGE, RESOURCE_METADATA, SERVER_METADATA, TOKEN = "challenge", "resource metadata", "server metadata", "token"

# Called once per request a token source makes: (name, seconds it took, the error it ended with or None).
OnRequest = Callable[[str, float, McpbenchError | None], None]


@dataclass(frozen=True, slots=True)
class OAuthConfig:
    """Where and how to get tokens (client credentials); the secret stays in its environment variable."""

    client_id: str
    client_secret_env: str
    token_url: str | None = None
    discover: bool = False
    scope: str | None = None
    audience: str | None = None
    resource: str | None = None
    shared: bool = False

    def __post_init__(self) -> None:
        if bool(self.token_url) == bool(self.discover):
            raise ValueError("give token_url or discover: true (one of them)")
        if not self.client_id:
            raise ValueError("client_id is required")
        if not self.client_secret_env:
            raise ValueError("client_secret_env is required (the name of the variable holding the secret)")
        if self.token_url and not self.token_url.startswith(("http://", "https://")):
            raise ValueError(f"token_url {self.token_url!r} is not an http(s) URL")

    @classmethod
    def from_mapping(cls, obj: Mapping) -> "OAuthConfig":
        """From a scenario's `auth: {oauth: {...}}` mapping.

        Raises:
            ValueError: an unknown key, a value of the wrong type, or a missing one.
        """
        if not isinstance(obj, Mapping):
            raise ValueError("oauth: expected a mapping (token_url or discover, client_id, client_secret_env, …)")
        unknown = sorted(set(obj) - set(KEYS))
        if unknown:
            raise ValueError(f"oauth: unknown key {unknown[0]!r} (known: {', '.join(KEYS)})")
        for key in ("discover", "shared"):
            if key in obj and not isinstance(obj[key], bool):
                raise ValueError(f"oauth {key}: must be true or false")
        texts = {key: obj[key] for key in KEYS if key in obj and key not in ("discover", "shared")}
        for key, value in texts.items():
            if value is not None and not isinstance(value, str):
                raise ValueError(f"oauth {key}: must be text")
        given = {key: obj[key] for key in KEYS if key in obj and obj[key] is not None}
        return cls(**{"client_id": "", "client_secret_env": "", **given})

    def to_json(self) -> dict:
        return {key: getattr(self, key) for key in KEYS}

    def secret(self, environ: Mapping[str, str]) -> str:
        """The client secret, from its variable.

        Raises:
            CredentialError: the variable is not set (named; its value never is).
        """
        value = environ.get(self.client_secret_env)
        if not value:
            raise CredentialError(f"oauth client_secret_env: environment variable {self.client_secret_env} is not set")
        return value


@dataclass(frozen=True, slots=True)
class TokenEndpoint:
    """Where tokens come from, and with what they are asked for."""

    url: str
    auth_method: str = auth.BASIC
    resource: str | None = None


class Discovery:
    """The token endpoint of one protected resource: named by the settings, or discovered once and kept.

    MCP 2025-11-25, "Authorization Server Discovery": the 401 challenge (from a `GET` of the
    resource without credentials) names the Protected Resource Metadata, which names the
    authorization server, whose metadata names the token endpoint. Thread-safe (gevent-safe
    under Locust, whose patching makes the lock a greenlet lock).
    """

    def __init__(self, config: OAuthConfig, resource_url: str, proxies: ProxySettings, *, timeout: float) -> None:
        self.config, self.resource_url, self.proxies, self.timeout = config, resource_url, proxies, timeout
        self._lock = threading.Lock()
        self._endpoint: TokenEndpoint | None = None
        if config.token_url:
            self._endpoint = TokenEndpoint(config.token_url, auth.BASIC, config.resource or resource_url)

    def endpoint(self, report: OnRequest, challenge: auth.Challenge | None = None) -> TokenEndpoint:
        """The token endpoint, discovered on first use.

        Raises:
            DiscoveryError: a document cannot be found or read; TargetError: a URL cannot be reached.
        """
        with self._lock:
            if self._endpoint is None:
                self._endpoint = self._discover(report, challenge)
            return self._endpoint

    def _get(self, name: str, url: str, report: OnRequest, **kw) -> Answer:
        started = time.perf_counter()
        try:
            answer = fetch("GET", url, headers={"accept": "application/json"}, proxy=self.proxies.route(url),
                           timeout=self.timeout, **kw)
        except McpbenchError as exc:
            report(name, time.perf_counter() - started, exc)
            raise
        report(name, time.perf_counter() - started, None)
        return answer

    def _document(self, name: str, urls: list[str], read, report: OnRequest):
        """The first of `urls` that holds a usable document (`read`); the first's problem if none does."""
        first: McpbenchError | None = None
        for url in urls:
            answer = self._get(name, url, report)
            try:
                return read(answer.status, answer.content_type, answer.body, url)
            except auth.DiscoveryError as exc:
                first = first or exc
        raise first

    def _discover(self, report: OnRequest, challenge: auth.Challenge | None) -> TokenEndpoint:
        if challenge is None:  # ask the resource for its challenge, as a client without credentials does
            answer = self._get(CHALLENGE, self.resource_url, report, head_only=True)
            challenge = auth.bearer_challenge(answer.headers.get(AUTHENTICATE)) if answer.status == 401 else None
        resource = self._document(RESOURCE_METADATA, auth.resource_metadata_urls(self.resource_url, challenge),
                                  auth.read_resource_metadata, report)
        issuer = resource.authorization_servers[0]
        server = self._document(SERVER_METADATA, auth.server_metadata_urls(issuer), auth.read_server_metadata, report)
        return TokenEndpoint(server.token_endpoint, server.auth_method, self.config.resource or resource.resource or self.resource_url)


class TokenSource:
    """The tokens of one user (or of every user of a process, `shared`): fetched on first use, renewed
    when due and after a 401.

    Args:
        config: the OAuth settings.
        secret: the client secret (read by the caller from `config.client_secret_env`).
        discovery: where the token endpoint comes from (shared by the sources of a process).
        on_request: told about each discovery and token request (a sample of its own under load).
        clock: seconds on a monotonic clock.
    """

    def __init__(self, config: OAuthConfig, secret: str, discovery: Discovery, *,
                 on_request: OnRequest | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._secret = secret
        self.discovery = discovery
        self.on_request = on_request or (lambda name, seconds, error: None)
        self.clock = clock
        self.token: auth.Token | None = None
        self.counts: Counter[str] = Counter()  # requests made, by name (discovery included)
        self._lock = threading.Lock()
        self._sent: tuple[auth.Token | None, dict[str, str]] = (None, {})

    @property
    def requests(self) -> int:
        """Token requests made."""
        return self.counts[TOKEN]

    def _report(self, name: str, seconds: float, error: McpbenchError | None) -> None:
        self.counts[name] += 1
        self.on_request(name, seconds, error)

    def headers(self) -> dict[str, str]:
        """`{"authorization": "Bearer …"}` with a token that is not due; fetched when needed.

        Raises:
            CredentialError (TokenRefused): the token endpoint refused these credentials.
            DiscoveryError, TargetError: the endpoint cannot be found, read or reached.
        """
        token = self.token
        if token is None or token.due(self.clock()):
            token = self._fetch(stale=token)
        return self._headers_of(token)

    def renew(self, used: str | None, challenge: auth.Challenge | None = None) -> dict[str, str]:
        """A new token after the server refused `used` (an `Authorization` value): fetched unless
        another user of this source has renewed it since (same raises as `headers`)."""
        current = self.token
        if current is not None and current.header != used:
            return self._headers_of(current)
        return self._headers_of(self._fetch(stale=current, challenge=challenge))

    def _headers_of(self, token: auth.Token) -> dict[str, str]:
        """The headers of `token`, one dict per token (a caller tells a new token by identity)."""
        if self._sent[0] is not token:
            self._sent = (token, {"authorization": token.header})
        return self._sent[1]

    def _fetch(self, stale: auth.Token | None, challenge: auth.Challenge | None = None) -> auth.Token:
        with self._lock:
            if self.token is not stale and self.token is not None:
                return self.token  # fetched by another user while this one waited
            endpoint = self.discovery.endpoint(self._report, challenge)
            config = self.config
            body, headers = auth.token_request(config.client_id, self._secret, scope=config.scope,
                                               resource=endpoint.resource, audience=config.audience,
                                               auth_method=endpoint.auth_method)
            started = time.perf_counter()
            try:
                answer = fetch("POST", endpoint.url, body=body, headers=headers, proxy=self.discovery.proxies.route(endpoint.url),
                               timeout=self.discovery.timeout)
                token = auth.read_token_response(answer.status, answer.content_type, answer.body, endpoint.url,
                                                 obtained=self.clock())
            except McpbenchError as exc:
                self._report(TOKEN, time.perf_counter() - started, exc)
                raise
            self._report(TOKEN, time.perf_counter() - started, None)
            self.token = token
            return token

    def __repr__(self) -> str:  # never the secret or the token
        return f"TokenSource(client_id={self.config.client_id!r}, requests={self.requests})"



__all__ = ["CHALLENGE", "Discovery", "TokenEndpoint", "KEYS", "OAuthConfig", "RESOURCE_METADATA", "SERVER_METADATA",
           "TOKEN", "TokenSource"]
