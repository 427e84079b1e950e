"""Check 9, authentication shape: when the server answers 401, can a client find out how to get a token?

MCP authorization (2025-06-18 on): the 401 carries `WWW-Authenticate: Bearer resource_metadata="…"`
naming the server's Protected Resource Metadata (RFC 9728), whose `authorization_servers` lead to
the authorization server's metadata (RFC 8414, or OpenID Connect discovery) with its token
endpoint. A request without credentials shows the challenge (the user's own are left out of it).
"""

from mcpbench.auth.fetch import fetch
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow, not_applicable
from mcpbench.probe.wire import WireError, left
from mcpbench.protocol import auth
from mcpbench.protocol.errors import McpbenchError
from mcpbench.protocol.http import GET_ACCEPT
from mcpbench.protocol.client import initialize_request

NAME, TITLE, BOUND = "auth", "Authentication shape", 8.0
FIX = ("Answer 401 with WWW-Authenticate: Bearer resource_metadata=\"<URL>\" and serve Protected Resource Metadata "
       "(RFC 9728) naming authorization servers whose metadata (RFC 8414) lists a token endpoint.")


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    status, header = target.auth_status, target.auth_challenge
    if status is None:
        status, header = _bare(target, deadline)
        if status != 401:
            return not_applicable(NAME, f"the server asks for no credentials (a request without any → HTTP {status})")
    if status != 401:
        return CheckRow(NAME, FAIL, f"HTTP {status} without a challenge: the credentials given were refused", FIX, {"status": status})
    return judge(_follow(target, header, deadline))


def _bare(target: ProbeTarget, deadline: float) -> tuple[int | None, str | None]:
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
        ex = session.send(session.conn.send(initialize_request(session.conn)), deadline=deadline, bare=True)
        if ex.ok:
            session.end(deadline=deadline)
    finally:
        session.close()
    return ex.status, ex.headers.get("www-authenticate") if ex.headers is not None else None


def _document(urls: list[str], read, target: ProbeTarget, deadline: float) -> tuple[str, int | None, object | None, str | None]:
    """The first of `urls` whose answer `read` (the core's reader) accepts: its URL, status, document
    and no problem; else the first URL's, with why it is no document."""
    first: tuple[str, int | None, object | None, str | None] | None = None
    for url in urls:
        status, found, problem = None, None, None
        try:  # without the user's credentials: metadata is public
            answer = fetch("GET", url, headers={"accept": "application/json"}, proxy=target.wire.options.proxy(url),
                           timeout=left(deadline))
            status = answer.status
            found = read(answer.status, answer.content_type, answer.body, url)
        except McpbenchError as exc:  # DiscoveryError: not found, not JSON, incomplete; TargetError: unreachable
            problem = str(exc)
        if found is not None:
            return url, status, found, None
        first = first or (url, status, None, problem)
    assert first is not None  # the core gives at least one URL
    return first


def _follow(target: ProbeTarget, header: str | None, deadline: float) -> dict:
    challenge = auth.bearer_challenge(header)
    named = challenge is not None and challenge.resource_metadata is not None
    figures: dict = {"challenge": header, "challenge_summary": challenge.summary() if challenge else None,
                     "resource_metadata": challenge.resource_metadata if challenge else None,
                     "scope": challenge.scope if challenge else None}
    url, status, metadata, problem = _document(auth.resource_metadata_urls(target.wire.url, challenge),
                                               auth.read_resource_metadata, target, deadline)
    figures.update(metadata_url=url, metadata_named=named, metadata_status=status, metadata=metadata is not None,
                   metadata_problem=problem)
    servers = list(metadata.authorization_servers) if metadata is not None else []
    figures["authorization_servers"] = servers
    if servers:
        url, _, server, problem = _document(auth.server_metadata_urls(servers[0]), auth.read_server_metadata, target, deadline)
        figures.update(server_metadata_url=url if server else None, token_endpoint=server.token_endpoint if server else None,
                       server_metadata_problem=problem)
    return figures


def judge(figures: dict) -> CheckRow:
    parts = [f"401 challenges {'with' if figures['metadata_named'] else 'without'} resource_metadata"
             + (f" ({figures['challenge_summary']})" if figures.get("challenge_summary") else "")]
    if not figures["metadata"]:
        parts.append(f"no Protected Resource Metadata at {figures['metadata_url']} (HTTP {figures['metadata_status']})"
                     if figures["metadata_status"] != 200 else figures["metadata_problem"])
        return CheckRow(NAME, FAIL, "; ".join(parts), FIX, figures)
    parts.append(f"metadata names {len(figures['authorization_servers'])} authorization server(s)")
    if not figures.get("token_endpoint"):
        parts.append("no authorization server metadata with a token endpoint found"
                     + (f" ({figures['server_metadata_problem']})" if figures.get("server_metadata_problem") else ""))
        return CheckRow(NAME, FAIL, "; ".join(parts), FIX, figures)
    parts.append(f"token endpoint {figures['token_endpoint']}")
    if not figures["metadata_named"]:
        return CheckRow(NAME, WARN, "; ".join(parts), FIX, figures)
    return CheckRow(NAME, PASS, "; ".join(parts), figures=figures)
