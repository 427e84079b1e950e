"""Authorization of an MCP client over HTTP, free of I/O: challenges, discovery documents, tokens.

MCP 2025-03-26 on ("Authorization"): a protected server answers 401 with a
`WWW-Authenticate` challenge (RFC 9110 §11.6.1) that names its Protected Resource
Metadata (RFC 9728, `resource_metadata`); that document names the authorization
servers, whose metadata (RFC 8414) names the token endpoint; a machine client gets
a token there with the client-credentials grant (RFC 6749 §4.4) and sends it as
`Authorization: Bearer …` (RFC 6750). The shells fetch (`mcpbench/auth/`); this module
says what to fetch, reads what came back, and decides when a token is to be renewed::

    challenge = bearer_challenge(www_authenticate)
    for url in resource_metadata_urls(mcp_url, challenge): …          # GET each until one answers
    resource = read_resource_metadata(status, content_type, body, url)
    for url in server_metadata_urls(resource.authorization_servers[0]): …
    server = read_server_metadata(status, content_type, body, url)
    body, headers = token_request(client_id, secret, scope=…, auth_method=server.auth_method)
    token = read_token_response(status, content_type, body, url, obtained=now)
    token.due(now)   # renew before it expires

Errors name the URL and what is wrong, never a secret: `DiscoveryError` (a document that
cannot be used: the environment) and `TokenRefused` (the authorization server said no to
these credentials: the input).
"""

import base64
import json
import re
from dataclasses import dataclass, field

from mcpbench.protocol import uri
from mcpbench.protocol.errors import CredentialError, EnvironmentProblem
from mcpbench.protocol.media import is_json

# RFC 9728 §3.1 and RFC 8414 §3.1: where the metadata documents live, inserted between the host and
# the resource's (or issuer's) path; OpenID Connect Discovery 1.0 §4 for servers that are also OPs.
RESOURCE_WELL_KNOWN = "/.well-known/oauth-protected-resource"
SERVER_WELL_KNOWN = "/.well-known/oauth-authorization-server"
OPENID_WELL_KNOWN = "/.well-known/openid-configuration"

# RFC 6749 §4.4.2: the grant a machine client uses.
CLIENT_CREDENTIALS = "client_credentials"
FORM = "application/x-www-form-urlencoded"
# RFC 8414 §2: when the metadata names no method, the client authenticates with HTTP Basic.
BASIC, POST = "client_secret_basic", "client_secret_post"

# A token is renewed this share of its lifetime before it expires, and at most this many seconds
# before: a request sent just before the renewal still arrives in time, and a short-lived token (a
# test's 2 s) is renewed well before its end rather than in its last milliseconds.
REFRESH_SHARE = 0.2
REFRESH_AHEAD_MAX = 60.0

# Of a refusal's or a document's body, at most this much goes into an error message.
DETAIL_CHARS = 160

# RFC 9110 §11.2: `token` characters, and a `token68` (`Basic dXNlcjpwYXNz`).
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TOKEN68 = re.compile(r"[A-Za-z0-9._~+/-]+=*")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_SPACE = re.compile(r"[ \t]*")


class DiscoveryError(EnvironmentProblem):
    """A metadata document or an authorization server that cannot be used (not found, not JSON, not OAuth)."""


class TokenRefused(CredentialError):
    """The token endpoint refused these credentials (`invalid_client`, `invalid_scope`, …)."""

    def __init__(self, url: str, error: str, description: str = "") -> None:
        self.url, self.error, self.description = url, error, description
        text = f" ({description[:DETAIL_CHARS]})" if description else ""
        super().__init__(f"token request to {url} refused: {error}{text}")


# --- challenges ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Challenge:
    """One `WWW-Authenticate` challenge: its scheme (lower case) and auth-params (names lower case)."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)
    token68: str | None = None

    @property
    def resource_metadata(self) -> str | None:
        """RFC 9728 §5.1: where the Protected Resource Metadata is."""
        return self.params.get("resource_metadata")

    @property
    def scope(self) -> str | None:
        """RFC 6750 §3: the scope the resource wants (MCP 2025-11-25: the client asks for it)."""
        return self.params.get("scope")

    @property
    def error(self) -> str | None:
        return self.params.get("error")

    def summary(self) -> str:
        """The challenge in one line, for a sample's detail and a report: scheme and the parameters that say why."""
        shown = [f"{key}={self.params[key]}" for key in ("error", "scope", "resource_metadata") if self.params.get(key)]
        return " ".join([self.scheme.capitalize(), *shown])

    def to_json(self) -> dict[str, str]:
        """What a sample keeps of it: `resource_metadata` and `scope`, as far as given, and `error`."""
        return {key: self.params[key] for key in ("resource_metadata", "scope", "error") if self.params.get(key)}


def parse_challenges(value: str | None) -> list[Challenge]:
    """The challenges of a `WWW-Authenticate` value (RFC 9110 §11.6.1), in order; [] when none can be read.

    `Basic realm="a", Bearer error="invalid_token", resource_metadata="https://…"` is two challenges:
    a token followed by a space starts one, `name=value` pairs (a value a token or a quoted string)
    belong to the one before.
    """
    out: list[Challenge] = []
    text, pos = value or "", 0
    scheme: str | None = None
    params: dict[str, str] = {}
    token68: str | None = None
    while pos < len(text):
        pos = _skip(text, pos, " \t,")
        match = _TOKEN.match(text, pos)
        if match is None:
            break
        name, after = match.group(0), _SPACE.match(text, match.end()).end()
        if after < len(text) and text[after] == "=" and scheme is not None and not text.startswith("==", after):
            pos = _SPACE.match(text, after + 1).end()
            quoted = _QUOTED.match(text, pos)
            if quoted is not None:
                params[name.lower()] = re.sub(r"\\(.)", r"\1", quoted.group(1))
                pos = quoted.end()
            else:
                bare = _TOKEN.match(text, pos)
                params[name.lower()] = bare.group(0) if bare else ""
                pos = bare.end() if bare else pos
            continue
        if scheme is not None:
            out.append(Challenge(scheme, params, token68))
        scheme, params, token68, pos = name.lower(), {}, None, after
        blob = _TOKEN68.match(text, pos)
        if blob is not None:
            end = _SPACE.match(text, blob.end()).end()
            if end >= len(text) or text[end] == ",":  # a token68, not the name of the first auth-param
                token68, pos = blob.group(0), end
    if scheme is not None:
        out.append(Challenge(scheme, params, token68))
    return out


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def bearer_challenge(value: str | None) -> Challenge | None:
    """The Bearer challenge of a `WWW-Authenticate` value, else its first, else None."""
    challenges = parse_challenges(value)
    return next((c for c in challenges if c.scheme == "bearer"), challenges[0] if challenges else None)


# --- discovery -------------------------------------------------------------------------------------


def _well_known(url: str, suffix: str, *, append: bool = False) -> str:
    """`suffix` inserted between `url`'s authority and its path (RFC 8615), or appended to the path."""
    parts = uri.split(url)
    path = parts.path.rstrip("/")
    where = f"{path}{suffix}" if append else f"{suffix}{path}"
    return f"{parts.scheme}://{parts.netloc}{where}"


def resource_metadata_urls(resource_url: str, challenge: Challenge | None) -> list[str]:
    """Where to look for the Protected Resource Metadata of `resource_url`, in order.

    MCP 2025-11-25 ("Protected Resource Metadata Discovery"): the challenge's `resource_metadata`
    first; without one, the well-known URI with the resource's path, then at the root.
    """
    if challenge is not None and challenge.resource_metadata:
        return [challenge.resource_metadata]
    urls = [_well_known(resource_url, RESOURCE_WELL_KNOWN), _well_known(_origin(resource_url), RESOURCE_WELL_KNOWN)]
    return list(dict.fromkeys(urls))


def server_metadata_urls(issuer: str) -> list[str]:
    """Where to look for an authorization server's metadata, in order (MCP 2025-11-25, "Authorization
    Server Metadata Discovery": RFC 8414, then OpenID Connect Discovery with the path inserted and appended)."""
    urls = [_well_known(issuer, SERVER_WELL_KNOWN), _well_known(issuer, OPENID_WELL_KNOWN)]
    if uri.split(issuer).path.strip("/"):
        urls.append(_well_known(issuer, OPENID_WELL_KNOWN, append=True))
    return list(dict.fromkeys(urls))


def _origin(url: str) -> str:
    parts = uri.split(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass(frozen=True, slots=True)
class ResourceMetadata:
    """RFC 9728 §2: what a protected resource says about itself."""

    resource: str | None
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ServerMetadata:
    """RFC 8414 §2: what an authorization server says about itself (the parts a machine client needs)."""

    issuer: str | None
    token_endpoint: str
    auth_methods: tuple[str, ...] = ()
    grant_types: tuple[str, ...] = ()

    @property
    def auth_method(self) -> str:
        """How to send the client secret: HTTP Basic unless the server lists only the form."""
        return POST if self.auth_methods and BASIC not in self.auth_methods and POST in self.auth_methods else BASIC


def _document(status: int, content_type: str | None, body: bytes, url: str, what: str) -> dict:
    """The JSON object of a metadata document, or a `DiscoveryError` saying why there is none."""
    if status != 200:
        raise DiscoveryError(f"{what} {url}: HTTP {status}{_shown(body)}")
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        kind = f" ({content_type})" if content_type and not is_json(content_type) else ""
        raise DiscoveryError(f"{what} {url}: not JSON{kind}{_shown(body)}") from None
    if not isinstance(obj, dict):
        raise DiscoveryError(f"{what} {url}: not a JSON object")
    return obj


def read_resource_metadata(status: int, content_type: str | None, body: bytes, url: str) -> ResourceMetadata:
    """The Protected Resource Metadata in an answer.

    Raises:
        DiscoveryError: not found, not JSON, or no `authorization_servers`.
    """
    obj = _document(status, content_type, body, url, "protected resource metadata")
    servers = obj.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not all(isinstance(s, str) for s in servers):
        raise DiscoveryError(f"protected resource metadata {url}: no authorization_servers")
    scopes = obj.get("scopes_supported")
    return ResourceMetadata(obj.get("resource") if isinstance(obj.get("resource"), str) else None, tuple(servers),
                            tuple(s for s in scopes if isinstance(s, str)) if isinstance(scopes, list) else ())


def read_server_metadata(status: int, content_type: str | None, body: bytes, url: str) -> ServerMetadata:
    """An authorization server's metadata in an answer.

    Raises:
        DiscoveryError: not found, not JSON, or no `token_endpoint`.
    """
    obj = _document(status, content_type, body, url, "authorization server metadata")
    endpoint = obj.get("token_endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        raise DiscoveryError(f"authorization server metadata {url}: no token_endpoint")

    def strings(key: str) -> tuple[str, ...]:
        value = obj.get(key)
        return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()

    return ServerMetadata(obj.get("issuer") if isinstance(obj.get("issuer"), str) else None, endpoint,
                          strings("token_endpoint_auth_methods_supported"), strings("grant_types_supported"))


# --- tokens ----------------------------------------------------------------------------------------


def form(pairs: list[tuple[str, str]]) -> bytes:
    """`application/x-www-form-urlencoded` (WHATWG URL §5.2): unreserved characters as they are, space `+`."""

    def quote(text: str) -> str:
        return "".join(
            c if c.isascii() and (c.isalnum() or c in "-._*") else "+" if c == " " else "".join(f"%{b:02X}" for b in c.encode())
            for c in text
        )

    return "&".join(f"{quote(name)}={quote(value)}" for name, value in pairs).encode("ascii")


def token_request(client_id: str, client_secret: str, *, scope: str | None = None, resource: str | None = None,
                  audience: str | None = None, auth_method: str = BASIC) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a client-credentials token request (RFC 6749 §4.4.2, §2.3.1).

    `resource` is RFC 8707's indicator (MCP: the server's URL); `audience` the parameter some
    authorization servers take instead.
    """
    pairs = [("grant_type", CLIENT_CREDENTIALS)]
    headers = {"content-type": FORM, "accept": "application/json"}
    if auth_method == POST:
        pairs += [("client_id", client_id), ("client_secret", client_secret)]
    else:  # RFC 6749 §2.3.1: both form-encoded before Basic encoding
        credentials = f"{_form_text(client_id)}:{_form_text(client_secret)}".encode()
        headers["authorization"] = "Basic " + base64.b64encode(credentials).decode("ascii")
    for name, value in (("scope", scope), ("resource", resource), ("audience", audience)):
        if value:
            pairs.append((name, value))
    return form(pairs), headers


def _form_text(text: str) -> str:
    return form([("", text)]).decode("ascii")[1:]


@dataclass(frozen=True, slots=True)
class Token:
    """An access token and when it was obtained (the shell's monotonic clock, seconds)."""

    access_token: str
    obtained: float
    expires_in: float | None = None
    token_type: str = "Bearer"
    scope: str | None = None

    @property
    def header(self) -> str:
        """The `Authorization` value (RFC 6750 §2.1)."""
        return f"Bearer {self.access_token}"

    def due(self, now: float) -> bool:
        """Whether to renew it now: `REFRESH_SHARE` of its lifetime (at most `REFRESH_AHEAD_MAX` s) before it expires."""
        if self.expires_in is None:
            return False  # kept until the server refuses it
        ahead = min(REFRESH_AHEAD_MAX, REFRESH_SHARE * self.expires_in)
        return now >= self.obtained + self.expires_in - ahead

    def __repr__(self) -> str:  # never the token itself
        return f"Token(expires_in={self.expires_in!r}, scope={self.scope!r})"


def read_token_response(status: int, content_type: str | None, body: bytes, url: str, *, obtained: float) -> Token:
    """The token in a token endpoint's answer (RFC 6749 §5.1), or why there is none.

    Raises:
        TokenRefused: the server answered with an OAuth error (§5.2): these credentials are wrong.
        DiscoveryError: the answer is no OAuth at all (an HTML page, a 404, no `access_token`).
    """
    try:
        obj = json.loads(body) if body.strip() else None
    except (ValueError, UnicodeDecodeError):
        obj = None
    if isinstance(obj, dict) and status >= 400 and isinstance(obj.get("error"), str):
        description = obj.get("error_description")
        raise TokenRefused(url, obj["error"], description if isinstance(description, str) else "")
    if status != 200 or not isinstance(obj, dict):
        what = "not JSON" if status == 200 else f"HTTP {status}"
        raise DiscoveryError(f"token_endpoint {url}: no OAuth answer ({what}){_shown(body, content_type)}")
    access = obj.get("access_token")
    if not isinstance(access, str) or not access:
        raise DiscoveryError(f"token_endpoint {url}: the answer has no access_token")
    kind = obj.get("token_type")
    if isinstance(kind, str) and kind.lower() != "bearer":
        raise DiscoveryError(f"token_endpoint {url}: token_type {kind!r}, not Bearer")
    lifetime = obj.get("expires_in")
    expires = float(lifetime) if isinstance(lifetime, (int, float)) and not isinstance(lifetime, bool) and lifetime > 0 else None
    scope = obj.get("scope") if isinstance(obj.get("scope"), str) else None
    return Token(access, obtained, expires, "Bearer", scope)


def _shown(body: bytes, content_type: str | None = None) -> str:
    """A short look at a body for an error message (a page title says more than its markup)."""
    text = body.decode("utf-8", "replace")
    title = re.search(r"(?is)<title>(.*?)</title>", text)
    if title is not None:
        text = title.group(1)
    text = " ".join(text.split())[:DETAIL_CHARS]
    kind = f" {content_type}" if content_type else ""
    return f":{kind} {text!r}" if text else ""


__all__ = [
    "BASIC", "CLIENT_CREDENTIALS", "Challenge", "DiscoveryError", "POST", "ResourceMetadata", "ServerMetadata", "Token",
    "TokenRefused", "bearer_challenge", "parse_challenges", "read_resource_metadata", "read_server_metadata",
    "read_token_response", "resource_metadata_urls", "server_metadata_urls", "token_request",
]
