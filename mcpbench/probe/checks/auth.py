"""Check 9, authentication shape: when the server answers 401, can a client find out how to get a token?

MCP authorization (2025-06-18 on): the 401 carries `WWW-Authenticate: Bearer resource_metadata="…"`
naming the server's Protected Resource Metadata (RFC 9728), whose `authorization_servers` lead to
the authorization server's metadata (RFC 8414, or OpenID Connect discovery) with its token
endpoint. A request without credentials shows the challenge (the user's own are left out of it).
"""

import json
import re
from urllib.parse import urljoin, urlsplit

from mcpbench.probe.target import Target
from mcpbench.probe.verdicts import FAIL, PASS, WARN, Row, not_applicable
from mcpbench.probe.wire import Wire, WireError
from mcpbench.protocol.http import GET_ACCEPT

NAME, TITLE, BOUND = "auth", "Authentication shape", 8.0
FIX = ("Answer 401 with WWW-Authenticate: Bearer resource_metadata=\"<URL>\" and serve Protected Resource Metadata "
       "(RFC 9728) naming authorization servers whose metadata (RFC 8414) lists a token endpoint.")
# auth-param = token BWS "=" BWS ( token / quoted-string ), RFC 9110 section 11.2
_PARAM = re.compile(r'([A-Za-z0-9!#$%&\'*+.^_`|~-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


def challenge_params(header: str | None) -> dict[str, str]:
    """The auth-params of a Bearer challenge (`resource_metadata`, `scope`, `error`, …), names lower-cased."""
    if not header or not header.strip().lower().startswith("bearer"):
        return {}
    return {m[1].lower(): (m[2].replace('\\"', '"') if m[2] is not None else m[3]) for m in _PARAM.finditer(header[6:])}


def run(target: Target, deadline: float) -> Row:
    status, header = target.auth_status, target.auth_challenge
    if status is None:
        status, header = _bare(target, deadline)
        if status != 401:
            return not_applicable(NAME, f"the server asks for no credentials (a request without any → HTTP {status})")
    if status != 401:
        return Row(NAME, FAIL, f"HTTP {status} without a challenge: the credentials given were refused", FIX, {"status": status})
    return judge(_follow(target, header, deadline))


def _bare(target: Target, deadline: float) -> tuple[int | None, str | None]:
    """The status and challenge of the first request of a session, sent without the user's credentials."""
    if target.legacy:
        try:
            reply = target.wire.request("GET", {"accept": GET_ACCEPT}, deadline=deadline, bare=True)
        except WireError:
            return None, None
        reply.close()
        return reply.status, reply.header("www-authenticate")
    session = target.session()
    try:
        ex = session.send(session.conn.initialize(), deadline=deadline, bare=True)
        if ex.ok:
            session.end(deadline=deadline)
    finally:
        session.close()
    return ex.status, ex.headers.get("www-authenticate") if ex.headers is not None else None


def _get_json(url: str, target: Target, deadline: float) -> tuple[int | None, dict | None]:
    try:
        reply = Wire(url, target.wire.options).request("GET", {"accept": "application/json"}, deadline=deadline, bare=True)
    except WireError:
        return None, None
    body = b"".join(chunk for chunk, _ in reply.chunks(deadline))
    reply.close()
    try:
        data = json.loads(body)
    except ValueError:
        return reply.status, None
    return reply.status, data if reply.status == 200 and isinstance(data, dict) else None


def _follow(target: Target, header: str | None, deadline: float) -> dict:
    params = challenge_params(header)
    figures: dict = {"challenge": header, "resource_metadata": params.get("resource_metadata"), "scope": params.get("scope")}
    url = params.get("resource_metadata")
    named = url is not None
    if url is None:  # RFC 9728 section 3: the well-known URL, with the resource's path after it
        parts = urlsplit(target.wire.url)
        url = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path.rstrip('/')}"
    status, metadata = _get_json(url, target, deadline)
    figures.update(metadata_url=url, metadata_named=named, metadata_status=status, metadata=metadata is not None)
    servers = (metadata or {}).get("authorization_servers") or []
    figures["authorization_servers"] = servers
    if servers:
        figures.update(_server_metadata(str(servers[0]), target, deadline))
    return figures


def _server_metadata(issuer: str, target: Target, deadline: float) -> dict:
    """RFC 8414's metadata of `issuer` (its path after the well-known name), else OpenID Connect's."""
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    for url in (f"{origin}/.well-known/oauth-authorization-server{path}", f"{origin}/.well-known/openid-configuration{path}",
                urljoin(issuer.rstrip("/") + "/", ".well-known/openid-configuration")):
        status, data = _get_json(url, target, deadline)
        if data is not None and data.get("token_endpoint"):
            return {"server_metadata_url": url, "token_endpoint": data["token_endpoint"]}
    return {"server_metadata_url": None, "token_endpoint": None}


def judge(figures: dict) -> Row:
    parts = [f"401 challenges {'with' if figures['metadata_named'] else 'without'} resource_metadata"]
    if not figures["metadata"]:
        parts.append(f"no Protected Resource Metadata at {figures['metadata_url']} (HTTP {figures['metadata_status']})")
        return Row(NAME, FAIL, "; ".join(parts), FIX, figures)
    parts.append(f"metadata names {len(figures['authorization_servers'])} authorization server(s)")
    if not figures.get("token_endpoint"):
        parts.append("no authorization server metadata with a token endpoint found")
        return Row(NAME, FAIL, "; ".join(parts), FIX, figures)
    parts.append(f"token endpoint {figures['token_endpoint']}")
    if not figures["metadata_named"]:
        return Row(NAME, WARN, "; ".join(parts), FIX, figures)
    return Row(NAME, PASS, "; ".join(parts), figures=figures)
