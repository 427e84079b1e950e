"""What each MCP protocol version allows, as data, and the one place that is asked.

Sources: the specification's `basic/transports` and `basic/lifecycle` pages and
each version's changelog (see ../shared/reference/transports.md for the
checklist this table was written from).

Whatever depends on a version (a handshake, a method, legacy SSE, the GET stream,
server requests, input-required results, the `_meta` envelope, a request sent in
the other era) asks the functions here; nothing outside `protocol/` compares an
era or a version (tests/protocol/test_layering.py checks).
"""

import enum
from dataclasses import dataclass
from typing import Any

from mcpbench.protocol.transports import LEGACY_SSE, STREAMABLE_HTTP


class Era(enum.Enum):
    """The two shapes an MCP session can take."""

    HANDSHAKE = "handshake"  # 2024-11-05 … 2025-11-25: initialize → initialized → operation
    STATELESS = "stateless"  # 2026-07-28: every request carries version and capabilities in _meta


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionRules:
    """The rules of one protocol version that mcpbench checks or relies on.

    Ask the functions below (`has_handshake`, `has_method`, …) rather than an era:
    they say what a version mcpbench does not know is taken for.
    """

    version: str
    era: Era  # handshake (initialize, then operation) or stateless (the `_meta` envelope on every request)
    http_transport: str  # the HTTP transport the version defines: "sse" (HTTP+SSE) or "streamable-http"
    # HTTP+SSE still specified (2024-11-05) or tolerated for compatibility: 2026-07-28 too, which the
    # official SDK serves and speaks over it (its envelope needs no transport of its own).
    legacy_sse: bool
    batches: bool  # JSON-RPC batches allowed
    protocol_version_header: bool  # MCP-Protocol-Version required on HTTP requests after init
    method_headers: bool  # Mcp-Method / Mcp-Name required
    get_stream: bool  # Streamable HTTP: GET opens a stream for server messages outside any request
    server_requests: bool  # the server may send requests (sampling, roots, elicitation)
    input_required: bool  # the server asks for input in an `input_required` result (multi round-trip)
    ping: bool
    tasks: bool = False  # task-augmented requests (2025-11-25's experimental tasks; 2026-07-28's tasks extension)


V2024_11_05 = "2024-11-05"
V2025_03_26 = "2025-03-26"
V2025_06_18 = "2025-06-18"
V2025_11_25 = "2025-11-25"
V2026_07_28 = "2026-07-28"

VERSIONS: dict[str, VersionRules] = {
    V2024_11_05: VersionRules(
        version=V2024_11_05, era=Era.HANDSHAKE, http_transport=LEGACY_SSE, legacy_sse=True, batches=False,
        protocol_version_header=False, method_headers=False, get_stream=False, server_requests=True,
        input_required=False, ping=True,
    ),
    V2025_03_26: VersionRules(
        version=V2025_03_26, era=Era.HANDSHAKE, http_transport=STREAMABLE_HTTP, legacy_sse=True, batches=True,
        protocol_version_header=False, method_headers=False, get_stream=True, server_requests=True,
        input_required=False, ping=True,
    ),
    V2025_06_18: VersionRules(
        version=V2025_06_18, era=Era.HANDSHAKE, http_transport=STREAMABLE_HTTP, legacy_sse=True, batches=False,
        protocol_version_header=True, method_headers=False, get_stream=True, server_requests=True,
        input_required=False, ping=True,
    ),
    V2025_11_25: VersionRules(
        version=V2025_11_25, era=Era.HANDSHAKE, http_transport=STREAMABLE_HTTP, legacy_sse=True, batches=False,
        protocol_version_header=True, method_headers=False, get_stream=True, server_requests=True,
        input_required=False, ping=True, tasks=True,
    ),
    V2026_07_28: VersionRules(
        version=V2026_07_28, era=Era.STATELESS, http_transport=STREAMABLE_HTTP, legacy_sse=True, batches=False,
        protocol_version_header=True, method_headers=True, get_stream=False, server_requests=False,
        input_required=True, ping=False, tasks=True,
    ),
}

LATEST = V2026_07_28
LATEST_HANDSHAKE = V2025_11_25

# Streamable HTTP, 2025-06-18: "If the server does not receive an
# MCP-Protocol-Version header … the server SHOULD assume protocol version 2025-03-26."
HTTP_DEFAULT_VERSION = V2025_03_26

# What users call each era (a scenario's `era:`, a load run's labels, the mock's errors): the
# handshake era by that word, the handshake-free one by its version.
ERA_NAMES: dict[Era, str] = {Era.HANDSHAKE: "handshake", Era.STATELESS: V2026_07_28}

# _meta keys of the 2026-07-28 per-request envelope.
META_PREFIX = "io.modelcontextprotocol/"
META_PROTOCOL_VERSION = META_PREFIX + "protocolVersion"
META_CLIENT_CAPABILITIES = META_PREFIX + "clientCapabilities"
META_CLIENT_INFO = META_PREFIX + "clientInfo"
META_SERVER_INFO = META_PREFIX + "serverInfo"

# 2026-07-28 multi round-trip requests (SEP-2322): a result asking the client for input
# (`resultType: "input_required"` with `inputRequests`), and the retried request carrying
# the answers (`inputResponses`, and the `requestState` the result gave).
RESULT_TYPE = "resultType"
INPUT_REQUIRED = "input_required"
INPUT_REQUESTS = "inputRequests"
INPUT_RESPONSES = "inputResponses"
REQUEST_STATE = "requestState"

# Methods whose target is named in the Mcp-Name header (2026-07-28).
NAMED_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
# The only methods whose result may be `input_required` (2026-07-28, SEP-2322), and the client
# capability each kind of embedded input request needs.
INPUT_METHODS = frozenset(NAMED_METHODS)
INPUT_CAPABILITIES = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}
# Tasks (2025-11-25 experimental; the 2026-07-28 extension polls with tasks/get, sends input with
# tasks/update, and has no tasks/result or tasks/list): the requests naming a task, its terminal statuses.
TASK_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/cancel", "tasks/update"})
TASK_STATUS = "notifications/tasks/status"
# Notifications about one request in flight: how far it got, and its sender giving up on it.
PROGRESS = "notifications/progress"
CANCELLED = "notifications/cancelled"
TERMINAL_TASK_STATUSES = frozenset({"completed", "failed", "cancelled"})
META_RELATED_TASK = META_PREFIX + "related-task"
# The 2026-07-28 tasks extension (SEP-2663): the capability a client declares in `extensions`, the
# `resultType` of a task handle, and the task methods whose `Mcp-Name` header is the task's id.
TASKS_EXTENSION = META_PREFIX + "tasks"
RESULT_TYPE_TASK = "task"
TASK_NAMED_METHODS = {"tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
# Subscriptions (2026-07-28, SEP-2575): one long-lived `subscriptions/listen` request whose response
# stream carries the change notifications asked for, each tagged with the listen request's id.
LISTEN = "subscriptions/listen"
LISTEN_ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
META_SUBSCRIPTION_ID = META_PREFIX + "subscriptionId"
# Logging is asked per request in 2026-07-28; a server sends `notifications/message` only for one that asked.
META_LOG_LEVEL = META_PREFIX + "logLevel"
LOG_MESSAGE = "notifications/message"
# Results a 2026-07-28 server gives freshness hints on (`ttlMs`, `cacheScope`).
CACHEABLE_METHODS = frozenset({"tools/list", "prompts/list", "resources/list", "resources/read", "resources/templates/list"})
CACHE_HINTS = ("ttlMs", "cacheScope")

# The handshake's own messages (`basic/lifecycle`), which 2026-07-28 no longer has.
HANDSHAKE_METHODS = frozenset({"initialize", "notifications/initialized"})
# What opens a 2026-07-28 session in their place.
DISCOVER = "server/discover"


# --- the table, asked ---------------------------------------------------------------------------


def rules(version: Any) -> VersionRules | None:
    """The rules of `version`, or None for a version mcpbench does not know (a peer's version field
    may hold any JSON value: a list or an object is no version either)."""
    return VERSIONS.get(version) if type(version) is str else None


def era_of(version: str | None) -> Era | None:
    """The era a known version belongs to."""
    known = rules(version)
    return known.era if known else None


def _assumed(version: str | None) -> VersionRules:
    """The rules `version` is held to: a version mcpbench does not know (or none yet) is taken
    for the handshake era's latest, as a session that has not shown an envelope is one of that era."""
    return rules(version) or VERSIONS[LATEST_HANDSHAKE]


def has_handshake(version: str | None) -> bool:
    """Whether a session of `version` starts with `initialize` (False: 2026-07-28, where every
    request carries the `_meta` envelope instead). An unknown version has one."""
    return _assumed(version).era is Era.HANDSHAKE


def is_latest_handshake(version: str | None) -> bool:
    """Whether `version` is the newest version with a handshake: what an up-to-date server answers it with."""
    return version == LATEST_HANDSHAKE


def same_era(a: str | None, b: str | None) -> bool:
    """Whether sessions of versions `a` and `b` take the same shape (unknown ones have a handshake)."""
    return has_handshake(a) is has_handshake(b)


def eras_differ(a: str | None, b: str | None) -> bool:
    """Whether `a` and `b` are both known versions, of different eras."""
    return rules(a) is not None and rules(b) is not None and not same_era(a, b)


def has_method(version: str | None, method: str) -> bool:
    """Whether `version` has `method`: the handshake's messages, `ping` and `server/discover`
    exist in some versions only; every other method is taken to exist."""
    known = _assumed(version)
    if method in HANDSHAKE_METHODS:
        return known.era is Era.HANDSHAKE
    if method == "ping":
        return known.ping
    if method == DISCOVER:
        return known.era is Era.STATELESS
    return True


def has_legacy_sse(version: str | None) -> bool:
    """Whether a session of `version` may run over legacy HTTP+SSE."""
    return _assumed(version).legacy_sse


def has_get_stream(version: str | None) -> bool:
    """Whether a Streamable HTTP client of `version` may open the GET stream for server messages.

    A version older than Streamable HTTP (2024-11-05) sends no `MCP-Protocol-Version` on it, so
    the server takes it for `HTTP_DEFAULT_VERSION`.
    """
    known = _assumed(version)
    if known.http_transport != STREAMABLE_HTTP:
        known = VERSIONS[HTTP_DEFAULT_VERSION]
    return known.get_stream


def allows_server_requests(version: str | None) -> bool:
    """Whether the server of a `version` session may send requests (sampling, roots, elicitation)."""
    return _assumed(version).server_requests


def era_name(version: str | None) -> str:
    """What users call the era of `version` (`ERA_NAMES`): "handshake" or "2026-07-28"."""
    return ERA_NAMES[_assumed(version).era]


def era_version(name: str) -> str | None:
    """The version a scenario's `era: name` stands for: an era's name (`ERA_NAMES`) its latest
    version, a known version itself; None for anything else."""
    for era, called in ERA_NAMES.items():
        if name == called:
            return [v for v, r in VERSIONS.items() if r.era is era][-1]
    return name if name in VERSIONS else None


def era_title(era: Era, *, span: bool = False) -> str:
    """How a sentence names `era`: "handshake-era" (with `span`, its versions too:
    "handshake-era (2024-11-05 … 2025-11-25)"), or the handshake-free era's name, "2026-07-28"."""
    if era is not Era.HANDSHAKE:
        return ERA_NAMES[era]
    first, *_, last = (v for v, r in VERSIONS.items() if r.era is era)
    return f"{ERA_NAMES[era]}-era ({first} … {last})" if span else f"{ERA_NAMES[era]}-era"


def request_era(method: str, params: Any) -> Era | None:
    """The era a client speaks, as one of its requests shows it: `initialize` a handshake (of the
    version it offers, or any), `server/discover` or a request with the envelope 2026-07-28 (or
    the envelope's version); None when the request does not say."""
    if method == "initialize":
        offered = params.get("protocolVersion") if isinstance(params, dict) else None
        return era_of(offered) or Era.HANDSHAKE
    if method == DISCOVER:
        return era_of(meta_version(params)) or Era.STATELESS
    return era_of(meta_version(params))


# --- one request, between eras ------------------------------------------------------------------


def translate(
    method: str, params: dict | None, recorded: str | None, live: str, *, input_round: bool = False, input_retry: bool = False,
) -> tuple[dict | None, str | None]:
    """A client message sent in version `recorded`, as a client speaking `live` sends it.

    Within one era nothing changes. Between the eras: a method `live` does not have goes
    (`initialize`, `notifications/initialized` and `ping` in 2026-07-28; in the handshake era,
    `server/discover`, which `initialize` replaces); where the server asks for input in requests
    rather than in an `input_required` result, the input round goes (the recording's answers
    come back as server requests, during its retry), its retry loses `inputResponses` and
    `requestState`; and without the envelope `_meta` loses its keys. The envelope `live` needs
    is not added: that is the connection's (`ClientConnection.prepare`).

    Args:
        recorded: the version the message was sent in (None or unknown: a handshake-era one).
        input_round: the message is a request whose `input_required` result a later one answered.
        input_retry: the message is that later request.

    Returns:
        (params, None): the params to send, the same object when nothing changed; or
        (None, why): `live` sends no such message.
    """
    if same_era(recorded, live):
        return params, None
    if not has_method(live, method):
        if method == DISCOVER:
            return None, f"{DISCOVER} is replaced by initialize in {live}"
        return None, f"{method} does not exist in {live}"
    known = _assumed(live)
    if not known.input_required:
        if input_round:
            return None, f"an {INPUT_REQUIRED} round: a server request in {live}"
        if input_retry and params:
            params = {k: v for k, v in params.items() if k not in (INPUT_RESPONSES, REQUEST_STATE)}
    if known.era is Era.HANDSHAKE and params and isinstance(params.get("_meta"), dict):
        meta = {k: v for k, v in params["_meta"].items() if not k.startswith(META_PREFIX)}
        params = {k: v for k, v in params.items() if k != "_meta"}
        if meta:
            params["_meta"] = meta
    return params, None


def as_offered(result: Any, offered: str) -> Any:
    """An `initialize` result, as a server that speaks `offered` answers a client that offered it
    (lifecycle: "If the server supports the requested protocol version, it MUST respond with the
    same version"): what `replay --protocol-version` expects in place of the recorded one."""
    if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
        return {**result, "protocolVersion": offered}
    return result


# --- request parameters -------------------------------------------------------------------------


def call_name(method: str, params: dict | None) -> str | None:
    """The tool, prompt or resource a request names (`NAMED_METHODS`), if any."""
    key = NAMED_METHODS.get(method)
    if key and params and isinstance(params.get(key), str):
        return params[key]
    return None


def step_name(method: str, params: dict | None) -> str:
    """`tools/call echo`: the method plus what it names (tool, prompt, uri), a low-cardinality key."""
    name = call_name(method, params)
    return f"{method} {name}" if name else method


def progress_token(params: Any) -> Any:
    """A request's `_meta.progressToken`, if it asks for progress."""
    if isinstance(params, dict):
        meta = params.get("_meta")
        if isinstance(meta, dict):
            return meta.get("progressToken")
    return None


def asks_for_input(result: Any) -> bool:
    """Whether a result is 2026-07-28's `input_required` one (the client answers, then retries)."""
    return isinstance(result, dict) and result.get(RESULT_TYPE) == INPUT_REQUIRED


def has_task_result(version: str | None) -> bool:
    """Whether a task of `version` ends with the blocking `tasks/result` (2025-11-25's experimental
    tasks); the 2026-07-28 extension inlines the result in `tasks/get` instead."""
    known = rules(version)
    return known is not None and known.tasks and known.era is Era.HANDSHAKE


def header_name_key(method: str) -> str | None:
    """The params key whose value a Streamable HTTP POST of `method` names in `Mcp-Name` (2026-07-28:
    a tool, prompt or resource; the task of a tasks extension request), if any."""
    return NAMED_METHODS.get(method) or TASK_NAMED_METHODS.get(method)


def has_input_required(version: str | None) -> bool:
    """Whether `version` has multi round-trip requests (and so `resultType` on every result)."""
    known = rules(version)
    return known is not None and known.input_required


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
