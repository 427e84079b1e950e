"""What each MCP protocol version allows, as data.

Sources: the specification's `basic/transports` and `basic/lifecycle` pages and
each version's changelog (see ../shared/reference/transports.md for the
checklist this table was written from).
"""

import enum
from dataclasses import dataclass


class Era(enum.Enum):
    """The two shapes an MCP session can take."""

    HANDSHAKE = "handshake"  # 2024-11-05 … 2025-11-25: initialize → initialized → operation
    STATELESS = "stateless"  # 2026-07-28: every request carries version and capabilities in _meta


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionRules:
    """The rules of one protocol version that mcpbench checks or relies on."""

    version: str
    era: Era
    http_transport: str  # "sse" (HTTP+SSE) or "streamable-http"
    legacy_sse: bool  # HTTP+SSE still specified (2024-11-05) or tolerated for compatibility
    batches: bool  # JSON-RPC batches allowed
    protocol_version_header: bool  # MCP-Protocol-Version required on HTTP requests after init
    method_headers: bool  # Mcp-Method / Mcp-Name required
    sessions: bool  # Mcp-Session-Id may be minted
    get_stream: bool  # GET opens a server-message stream
    resumable: bool  # Last-Event-ID resumption defined
    server_requests: bool  # the server may send requests (sampling, roots, elicitation)
    ping: bool


V2024_11_05 = "2024-11-05"
V2025_03_26 = "2025-03-26"
V2025_06_18 = "2025-06-18"
V2025_11_25 = "2025-11-25"
V2026_07_28 = "2026-07-28"

VERSIONS: dict[str, VersionRules] = {
    V2024_11_05: VersionRules(
        version=V2024_11_05, era=Era.HANDSHAKE, http_transport="sse", legacy_sse=True, batches=False,
        protocol_version_header=False, method_headers=False, sessions=False, get_stream=False,
        resumable=False, server_requests=True, ping=True,
    ),
    V2025_03_26: VersionRules(
        version=V2025_03_26, era=Era.HANDSHAKE, http_transport="streamable-http", legacy_sse=True,
        batches=True, protocol_version_header=False, method_headers=False, sessions=True,
        get_stream=True, resumable=True, server_requests=True, ping=True,
    ),
    V2025_06_18: VersionRules(
        version=V2025_06_18, era=Era.HANDSHAKE, http_transport="streamable-http", legacy_sse=True,
        batches=False, protocol_version_header=True, method_headers=False, sessions=True,
        get_stream=True, resumable=True, server_requests=True, ping=True,
    ),
    V2025_11_25: VersionRules(
        version=V2025_11_25, era=Era.HANDSHAKE, http_transport="streamable-http", legacy_sse=True,
        batches=False, protocol_version_header=True, method_headers=False, sessions=True,
        get_stream=True, resumable=True, server_requests=True, ping=True,
    ),
    V2026_07_28: VersionRules(
        version=V2026_07_28, era=Era.STATELESS, http_transport="streamable-http", legacy_sse=False,
        batches=False, protocol_version_header=True, method_headers=True, sessions=False,
        get_stream=False, resumable=False, server_requests=False, ping=False,
    ),
}

LATEST = V2026_07_28
LATEST_HANDSHAKE = V2025_11_25

# Streamable HTTP, 2025-06-18: "If the server does not receive an
# MCP-Protocol-Version header … the server SHOULD assume protocol version 2025-03-26."
HTTP_DEFAULT_VERSION = V2025_03_26

# _meta keys of the 2026-07-28 per-request envelope.
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

# Methods whose target is named in the Mcp-Name header (2026-07-28).
NAMED_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def step_name(method: str, params: dict | None) -> str:
    """`tools/call echo`: the method plus what it names (tool, prompt, uri), a low-cardinality key."""
    key = NAMED_METHODS.get(method)
    if key and params and isinstance(params.get(key), str):
        return f"{method} {params[key]}"
    return method


def rules(version: str | None) -> VersionRules | None:
    """The rules of `version`, or None for a version mcpbench does not know."""
    return VERSIONS.get(version) if version else None


def era_of(version: str | None) -> Era | None:
    """The era a known version belongs to."""
    known = rules(version)
    return known.era if known else None


def meta_version(params: dict | None) -> str | None:
    """The protocol version carried in a request's `_meta` envelope (2026-07-28), if any."""
    if not params:
        return None
    meta = params.get("_meta")
    if isinstance(meta, dict):
        version = meta.get(META_PROTOCOL_VERSION)
        return version if isinstance(version, str) else None
    return None


def envelope(version: str, *, capabilities: dict | None = None, client_info: dict | None = None) -> dict:
    """The `_meta` envelope a 2026-07-28 request carries."""
    meta: dict = {META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: capabilities or {}}
    if client_info is not None:
        meta[META_CLIENT_INFO] = client_info
    return meta
