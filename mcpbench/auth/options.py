"""How a client reaches a deployment: the user's headers, a bearer token, OAuth, a proxy.

One options object for every client path (`replay`, `load`, `serve-trace --on-miss forward`, the
probes) and one click decorator that gives a command those options::

    @click.command()
    @client_options
    def replay(..., client: ClientOptions): ...
        access = client.resolve(target_url)        # headers read, proxy parsed, secret checked

`ClientOptions` holds what the user wrote (`$VAR` and `@FILE` unexpanded, no secret), so it may be
written to a results file (`to_json`); `ClientAccess` holds what a client sends, and is never written.
"""

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import click

from mcpbench.auth import headers as header_specs
from mcpbench.auth.oauth import Discovery, OAuthConfig, OnRequest, TokenSource
from mcpbench.auth.proxy import ProxySettings, hidden
from mcpbench.protocol.errors import CredentialError
from mcpbench.protocol.http import AUTHORIZATION

# How long a discovery or token request may take by default (connect included).
AUTH_TIMEOUT = 10.0


@dataclass(frozen=True)
class ClientOptions:
    """What the user asked for, as written: header specs, the bearer token's variable, OAuth, a proxy URL."""

    headers: tuple[str, ...] = ()
    bearer_token_env: str | None = None
    oauth: OAuthConfig | None = None
    proxy: str | None = None
    base: Path | None = field(default=None, compare=False)  # where a relative @FILE is (a scenario's folder)

    @property
    def given(self) -> bool:
        return bool(self.headers or self.bearer_token_env or self.oauth or self.proxy)

    def over(self, base: "ClientOptions") -> "ClientOptions":
        """These options (the command line's) over `base` (a scenario's): headers added after, the rest replaced."""
        if not self.given:
            return base
        return ClientOptions(
            headers=base.headers + self.headers,
            bearer_token_env=self.bearer_token_env or (None if self.oauth else base.bearer_token_env),
            oauth=self.oauth or (None if self.bearer_token_env else base.oauth),
            proxy=self.proxy or base.proxy,
            base=base.base,
        )

    def resolve(self, target_url: str | None, environ: Mapping[str, str] | None = None) -> "ClientAccess":
        """Read every header, the bearer token and the client secret, and parse the proxy.

        Raises:
            CredentialError: a header without a colon, a variable not set, a file that cannot be
                read, a proxy URL that cannot be parsed, credentials for a stdio target.
        """
        environ = os.environ if environ is None else environ
        if self.given and target_url is None and (self.headers or self.bearer_token_env or self.oauth):
            raise CredentialError("--header, --bearer-token-env and OAuth apply to HTTP targets, not stdio")
        sent = header_specs.expand_all(self.headers, environ=environ, base=self.base)
        if self.bearer_token_env:
            if self.oauth is not None:
                raise CredentialError("give --bearer-token-env or OAuth, not both")
            if AUTHORIZATION in sent:
                raise CredentialError("give --bearer-token-env or an Authorization header, not both")
            token = environ.get(self.bearer_token_env)
            if not token:
                raise CredentialError(f"--bearer-token-env: environment variable {self.bearer_token_env} is not set")
            sent[AUTHORIZATION] = f"Bearer {token.strip()}"
        secret = self.oauth.secret(environ) if self.oauth is not None else None
        if self.oauth is not None and AUTHORIZATION in sent:
            raise CredentialError("give OAuth or an Authorization header, not both")
        return ClientAccess(sent, ProxySettings.read(environ, self.proxy), self.oauth, secret, target_url)

    def to_json(self) -> dict:
        """For a results file: header specs with literal values hidden, variable names, no secret."""
        return {
            "headers": [header_specs.shown(spec) for spec in self.headers],
            "bearer_token_env": self.bearer_token_env,
            "oauth": self.oauth.to_json() if self.oauth is not None else None,
            "proxy": self.proxy and hidden(self.proxy),
        }

    @classmethod
    def from_json(cls, obj: dict | None) -> "ClientOptions":
        """Back from `to_json` (a literal header value comes back hidden: the caller passes the real ones)."""
        obj = obj or {}
        oauth = OAuthConfig.from_mapping(obj["oauth"]) if obj.get("oauth") else None
        return cls(tuple(obj.get("headers") or ()), obj.get("bearer_token_env"), oauth, obj.get("proxy"))


@dataclass
class ClientAccess:
    """What a client sends and through where: the user's headers (read), the proxies, OAuth's tokens."""

    headers: dict[str, str]
    proxies: ProxySettings
    oauth: OAuthConfig | None = None
    secret: str | None = field(default=None, repr=False)
    resource_url: str | None = None
    timeout: float = AUTH_TIMEOUT
    _discovery: Discovery | None = field(default=None, repr=False)
    _tokens: TokenSource | None = field(default=None, repr=False)

    @classmethod
    def none(cls) -> "ClientAccess":
        """No headers, no OAuth, and the proxies of this process's environment."""
        return cls({}, ProxySettings.read(os.environ))

    @property
    def credentials(self) -> bool:
        """Whether the client authenticates (an Authorization header, or OAuth)."""
        return self.oauth is not None or AUTHORIZATION in self.headers

    def discovery(self) -> Discovery:
        """The token endpoint's discovery, one per access (the token sources made from it share it)."""
        if self._discovery is None:
            self._discovery = Discovery(self.oauth, self.resource_url or "", self.proxies, timeout=self.timeout)
        return self._discovery

    def token_source(self, on_request: OnRequest | None = None) -> TokenSource | None:
        """A new token source (one load user's tokens), or None without OAuth."""
        if self.oauth is None:
            return None
        return TokenSource(self.oauth, self.secret or "", self.discovery(), on_request=on_request)

    def tokens(self) -> TokenSource | None:
        """The one token source of a single client (a replay, a forwarder, a pre-flight check), or None."""
        if self._tokens is None:
            self._tokens = self.token_source()
        return self._tokens

    def headers_now(self) -> dict[str, str]:
        """The headers a request carries now: the user's, and a token that is not due (fetched if needed).

        Raises:
            CredentialError, DiscoveryError, TargetError: no token can be had.
        """
        tokens = self.tokens()
        return {**self.headers, **tokens.headers()} if tokens is not None else self.headers

    def to_env(self, proxy: str | None) -> str:
        """What another process of this run needs to send the same (its environment gives the rest):
        the headers as read, and `--proxy` as given. Holds secrets: for a child's environment only."""
        return json.dumps({"headers": self.headers, "proxy": proxy})

    @classmethod
    def from_env(cls, text: str | None, options: "ClientOptions", resource_url: str | None,
                 environ: Mapping[str, str] | None = None) -> "ClientAccess":
        """The access `to_env` described, in a child process (`options` for OAuth; the secret from `environ`)."""
        environ = os.environ if environ is None else environ
        given = json.loads(text) if text else {}
        secret = options.oauth.secret(environ) if options.oauth is not None else None
        return cls(dict(given.get("headers") or {}), ProxySettings.read(environ, given.get("proxy")), options.oauth,
                   secret, resource_url)


# --- the command line --------------------------------------------------------------------------------

_OPTIONS = [
    click.option("--header", "-H", "client_headers", multiple=True, metavar="'NAME: VALUE'",
                 help="Send this header on every request (repeatable). VALUE $VAR or ${VAR}: from the environment; "
                      "@FILE: the file's first line."),
    click.option("--bearer-token-env", metavar="VAR", help="Send Authorization: Bearer with the token in this environment variable."),
    click.option("--proxy", "client_proxy", metavar="URL",
                 help="Send HTTP through this proxy (http://[user:pass@]host:port); default: HTTPS_PROXY/HTTP_PROXY, minus NO_PROXY."),
    click.option("--oauth-token-url", metavar="URL", help="OAuth client credentials: the token endpoint."),
    click.option("--oauth-discover", is_flag=True, help="OAuth: find the token endpoint from the server's 401 challenge (RFC 9728, RFC 8414)."),
    click.option("--oauth-client-id", metavar="ID", help="OAuth: the client id."),
    click.option("--oauth-client-secret-env", metavar="VAR", help="OAuth: the environment variable holding the client secret."),
    click.option("--oauth-scope", metavar="SCOPE", help="OAuth: the scope to ask for."),
    click.option("--oauth-audience", metavar="AUDIENCE", help="OAuth: an audience parameter for the token request."),
    click.option("--oauth-resource", metavar="URL", help="OAuth: the resource indicator (RFC 8707; default: the server's URL)."),
    click.option("--oauth-shared", is_flag=True, help="OAuth (load): one token for all users of a load process, not one per user."),
]
_NAMES = ("client_headers", "bearer_token_env", "client_proxy", "oauth_token_url", "oauth_discover", "oauth_client_id",
          "oauth_client_secret_env", "oauth_scope", "oauth_audience", "oauth_resource", "oauth_shared")


def options_from_cli(client_headers=(), bearer_token_env=None, client_proxy=None, oauth_token_url=None, oauth_discover=False,
                     oauth_client_id=None, oauth_client_secret_env=None, oauth_scope=None, oauth_audience=None,
                     oauth_resource=None, oauth_shared=False) -> ClientOptions:
    """The options object of the command line's values.

    Raises:
        CredentialError: OAuth options that do not make one setting (naming what is missing).
    """
    oauth = None
    if any((oauth_token_url, oauth_discover, oauth_client_id, oauth_client_secret_env, oauth_scope, oauth_audience,
            oauth_resource, oauth_shared)):
        try:
            oauth = OAuthConfig(client_id=oauth_client_id or "", client_secret_env=oauth_client_secret_env or "",
                                token_url=oauth_token_url, discover=oauth_discover, scope=oauth_scope,
                                audience=oauth_audience, resource=oauth_resource, shared=oauth_shared)
        except ValueError as exc:
            raise CredentialError(f"--oauth-*: {exc}") from None
    return ClientOptions(tuple(client_headers), bearer_token_env, oauth, client_proxy)


@dataclass(frozen=True, kw_only=True)
class ClientArgs:
    """The part of a command's options object (`ReplayArgs`, `LoadArgs`, …) that `client_options` gives."""

    client: ClientOptions


def client_options(func):
    """The options above, given to the command as one `client: ClientOptions` argument."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        values = {name: kwargs.pop(name) for name in _NAMES if name in kwargs}
        try:
            kwargs["client"] = options_from_cli(**values)
        except CredentialError as exc:
            raise click.UsageError(str(exc)) from None
        return func(*args, **kwargs)

    for option in reversed(_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


__all__ = ["AUTH_TIMEOUT", "ClientAccess", "ClientArgs", "ClientOptions", "client_options", "options_from_cli"]
