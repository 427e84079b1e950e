"""The reference server's protection: a bearer token, or OAuth 2.1 client credentials with its own
small authorization server (`mcpbench lab serve --auth bearer|oauth`).

Built on the official SDK's auth support: `AuthSettings` makes the SDK answer a request without a
valid token 401 with a `WWW-Authenticate` challenge naming its Protected Resource Metadata (RFC
9728, served by the SDK too), and 403 `insufficient_scope` for a token without the required scope;
`LabTokenVerifier` is the SDK's `TokenVerifier`. The SDK's own authorization server has no
client-credentials grant, so the lab adds one on the same origin, as custom routes (unprotected):

    GET  /.well-known/oauth-authorization-server   RFC 8414 metadata (issuer: the server's origin)
    POST /oauth/token                              RFC 6749 §4.4: client_credentials, the secret by
                                                   HTTP Basic or in the form

Tokens live in memory for `lifetime` seconds (short in tests, to exercise renewal); a restart
forgets them. The accepted client secret and the fixed token come from environment variables.
"""

import base64
import secrets
import time
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qsl, unquote_plus

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

BEARER, OAUTH = "bearer", "oauth"
AUTH_MODES: Final = ("none", BEARER, OAUTH)
TOKEN_PATH: Final = "/oauth/token"
SERVER_METADATA_PATH: Final = "/.well-known/oauth-authorization-server"
DEFAULT_CLIENT_ID: Final = "mcpbench-lab"
DEFAULT_SCOPE: Final = "mcp"
# Scopes the lab's authorization server grants: the required one, and one that is not enough (403).
EXTRA_SCOPE: Final = "other"
# A token lives an hour unless told otherwise: long enough for any lab run.
DEFAULT_LIFETIME: Final = 3600.0
# Random bytes per issued token.
TOKEN_BYTES: Final = 24
# Issued tokens kept at once; the oldest are forgotten first (a long load run with short tokens).
MAX_TOKENS: Final = 100_000


@dataclass
class LabTokenVerifier:
    """The SDK's `TokenVerifier` over the tokens the lab issued, plus an optional fixed token."""

    client_id: str
    scope: str
    fixed: str | None = None
    tokens: dict[str, tuple[float, tuple[str, ...]]] = field(default_factory=dict)  # token -> (expiry, scopes)

    async def verify_token(self, token: str) -> AccessToken | None:
        if self.fixed is not None and secrets.compare_digest(token, self.fixed):
            return AccessToken(token=token, client_id=self.client_id, scopes=[self.scope])
        issued = self.tokens.get(token)
        if issued is None:
            return None
        expiry, scopes = issued
        if time.time() >= expiry:  # to the millisecond (the SDK's own check rounds to seconds)
            del self.tokens[token]
            return None
        return AccessToken(token=token, client_id=self.client_id, scopes=list(scopes), expires_at=int(expiry) + 1)

    def issue(self, scopes: tuple[str, ...], lifetime: float) -> str:
        if len(self.tokens) >= MAX_TOKENS:
            for old in list(self.tokens)[: MAX_TOKENS // 10]:
                del self.tokens[old]
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self.tokens[token] = (time.time() + lifetime, scopes)
        return token


@dataclass(frozen=True)
class LabAuth:
    """How the reference server is protected, and the routes of its authorization server."""

    mode: str
    origin: str  # http://127.0.0.1:PORT: the issuer, and the resource's origin
    resource_path: str  # /mcp or /sse
    verifier: LabTokenVerifier
    client_secret: str | None = None
    lifetime: float = DEFAULT_LIFETIME

    def settings(self) -> AuthSettings:
        """The SDK's settings: in OAuth mode the resource names its metadata (and this server as its
        authorization server) in every challenge; a bearer-only server has no metadata to name."""
        resource = f"{self.origin}{self.resource_path}" if self.mode == OAUTH else None
        return AuthSettings(issuer_url=self.origin, resource_server_url=resource, required_scopes=[self.verifier.scope],
                            validate_token_resource=False if resource else None)

    def install(self, server) -> None:
        """Add the authorization server's routes to an `MCPServer` (OAuth mode)."""
        if self.mode != OAUTH:
            return
        server.custom_route(SERVER_METADATA_PATH, methods=["GET"])(self._metadata)
        server.custom_route(TOKEN_PATH, methods=["POST"])(self._token)

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse({
            "issuer": self.origin,
            "token_endpoint": f"{self.origin}{TOKEN_PATH}",
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "scopes_supported": [self.verifier.scope, EXTRA_SCOPE],
            "response_types_supported": [],
        })

    async def _token(self, request: Request) -> Response:
        """RFC 6749 §4.4 and §5: a token for the client credentials, or the error saying why not."""
        fields = dict(parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True))
        client_id, secret = fields.get("client_id"), fields.get("client_secret")
        basic = request.headers.get("authorization", "")
        if basic.lower().startswith("basic "):
            try:
                pair = base64.b64decode(basic[6:]).decode()
            except (ValueError, UnicodeDecodeError):
                pair = ""
            name, _, password = pair.partition(":")
            client_id, secret = unquote_plus(name), unquote_plus(password)
        if fields.get("grant_type") != "client_credentials":
            return _error(400, "unsupported_grant_type", "only client_credentials")
        if client_id != self.verifier.client_id or not secret or not secrets.compare_digest(secret, self.client_secret or ""):
            return _error(401, "invalid_client", "unknown client or wrong secret", basic=True)
        asked = tuple((fields.get("scope") or self.verifier.scope).split())
        if any(scope not in (self.verifier.scope, EXTRA_SCOPE) for scope in asked):
            return _error(400, "invalid_scope", f"grantable scopes: {self.verifier.scope} {EXTRA_SCOPE}")
        token = self.verifier.issue(asked, self.lifetime)
        lifetime = int(self.lifetime) if self.lifetime == int(self.lifetime) else round(self.lifetime, 3)
        return JSONResponse({"access_token": token, "token_type": "Bearer", "expires_in": lifetime,
                             "scope": " ".join(asked)}, headers={"cache-control": "no-store"})


def _error(status: int, error: str, description: str, *, basic: bool = False) -> Response:
    headers = {"cache-control": "no-store"}
    if basic:  # RFC 6749 §5.2: a failed client authentication by Basic says so
        headers["www-authenticate"] = 'Basic realm="mcpbench-lab"'
    return JSONResponse({"error": error, "error_description": description}, status_code=status, headers=headers)


__all__ = ["AUTH_MODES", "BEARER", "DEFAULT_CLIENT_ID", "DEFAULT_LIFETIME", "DEFAULT_SCOPE", "EXTRA_SCOPE", "LabAuth",
           "LabTokenVerifier", "OAUTH", "SERVER_METADATA_PATH", "TOKEN_PATH"]
