"""OpenTelemetry's semantic conventions for MCP, as mcpbench applies them: names, attributes, errors.

The conventions (GenAI semantic conventions, `docs/gen-ai/mcp.md`, status: development) name a span
`{mcp.method.name} {target}`, the target being the tool or prompt a request names (never a
resource URI, which is high-cardinality: it goes in `mcp.resource.uri`); a JSON-RPC error's code
is `error.type` and `rpc.response.status_code`, a tool result with `isError` is `error.type =
tool_error`; `network.transport` is `pipe` for stdio and `tcp` for HTTP. Where they are silent,
mcpbench's choices are in docs/telemetry.md (the session span, `unanswered`, the `mcpbench.*`
attributes).
"""

from typing import Any
from urllib.parse import urlsplit

from mcpbench.protocol.transports import STDIO
from mcpbench.protocol.versions import NAMED_METHODS

# Attribute names of the conventions.
METHOD = "mcp.method.name"
SESSION_ID = "mcp.session.id"
PROTOCOL_VERSION = "mcp.protocol.version"
RESOURCE_URI = "mcp.resource.uri"
REQUEST_ID = "jsonrpc.request.id"
TOOL = "gen_ai.tool.name"
PROMPT = "gen_ai.prompt.name"
OPERATION = "gen_ai.operation.name"
NETWORK_TRANSPORT = "network.transport"
NETWORK_PROTOCOL = "network.protocol.name"
ERROR_TYPE = "error.type"
STATUS_CODE = "rpc.response.status_code"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
SERVICE_NAME = "service.name"

# mcpbench's own attributes, where the conventions have none: the MCP transport by name (the
# conventions' `network.transport` cannot tell legacy SSE from Streamable HTTP), the era, and
# the outcome as `inspect` says it.
TRANSPORT = "mcpbench.transport"
ERA = "mcpbench.era"
SESSION_KEY = "mcpbench.session"  # the trace's session key (stdio has no session id)
OUTCOME = "mcpbench.outcome"
VIOLATION_CODE = "mcpbench.violation.code"
ERROR_CLASS = "mcpbench.error.class"

# `gen_ai.operation.name` of a tool call.
EXECUTE_TOOL = "execute_tool"
# `error.type` of a tool result with isError (the conventions' value).
TOOL_ERROR = "tool_error"
# `error.type` of a request the session ended without answering (mcpbench's choice).
UNANSWERED = "unanswered"

# The conventions' bucket boundaries (seconds) for the operation and session durations.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)

# The requests whose `{target}` is a name (`NAMED_METHODS` less resources/read: its URI is no
# low-cardinality target), and the attribute that name goes in.
TARGETS = {"tools/call": TOOL, "prompts/get": PROMPT}
RESOURCE_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe", "notifications/resources/updated"})

# mcpbench's name for the session span (the conventions define none).
SESSION_SPAN = "mcp.session"

# Label values kept per label before the rest are folded into OTHER: tool and prompt names
# come from the traffic, and every value is a time series in Prometheus.
MAX_LABEL_VALUES = 50
OTHER = "other"


def network_transport(transport: str | None) -> str:
    """The conventions' `network.transport` of an MCP transport: `pipe` (stdio) or `tcp` (HTTP)."""
    return "pipe" if transport == STDIO else "tcp"


def request_attributes(method: str, params: Any) -> tuple[str, dict[str, Any]]:
    """A request's span name and its method attributes (`mcp.method.name`, the tool or prompt,
    `mcp.resource.uri`, `gen_ai.operation.name` for a tool call)."""
    attributes: dict[str, Any] = {METHOD: method}
    name = method
    target_key = TARGETS.get(method)
    if target_key is not None and isinstance(params, dict):
        target = params.get(NAMED_METHODS[method])
        if isinstance(target, str):
            attributes[target_key] = target
            name = f"{method} {target}"
    if method == "tools/call":
        attributes[OPERATION] = EXECUTE_TOOL
    if method in RESOURCE_METHODS and isinstance(params, dict) and isinstance(params.get("uri"), str):
        attributes[RESOURCE_URI] = params["uri"]
    return name, attributes


def server_endpoint(url: Any) -> dict[str, Any]:
    """`server.address` and `server.port` of an upstream URL (a trace header's `upstream`)."""
    if not isinstance(url, str):
        return {}
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return {}
    return {SERVER_ADDRESS: parts.hostname, SERVER_PORT: port} if parts.hostname else {}


class Folder:
    """Label values in bounded number: the first `limit` seen stay themselves, the rest become OTHER."""

    def __init__(self, limit: int = MAX_LABEL_VALUES) -> None:
        self.limit = limit
        self.kept: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self.kept:
            return value
        if len(self.kept) >= self.limit:
            return OTHER
        self.kept.add(value)
        return value
