"""A reference MCP server built on the official Python SDK (`mcp` 2.x), for recording, replay and load tests.

Tools: `echo`, `add`, `slow` (progress notifications), `fail` (an `isError` result), `big` (a sized
payload), `ask` (a request back to the client) and `toggle_tool` (adds or removes the tool `extra`
and says the tool list changed); resource `mcpbench://greeting`; prompt `summarize`.

With `tasks` (`lab serve --tasks`), the tool `work` runs as a task, in both forms (2025-11-25's
`task` param, 2026-07-28's `io.modelcontextprotocol/tasks` extension): the SDK 2.3 has the types and
the hooks but no task runtime, so `lab/peers/tasks.py` is one, a middleware on the SDK's server. Off by
default: the tool list every other recording shows stays as it was.
The SDK answers both protocol eras on one endpoint: the handshake era (`initialize`, 2025-11-25 and
older) and 2026-07-28 (`server/discover`, per-request `_meta` envelope, no session).

How `ask` behaves (found by reading and driving mcp 2.3.0):

- Handshake era: a server→client `sampling/createMessage` (or `elicitation/create`) request rides the
  `tools/call` response stream, tied to the call by `related_request_id`. That needs a back-channel:
  with `json_response=True` or `stateless_http=True` the SDK reports `ctx.session.can_send_request`
  as False and `send_request` would raise `NoBackChannelError`, so `ask` answers with a text saying
  so instead of failing.
- 2026-07-28: server→client requests are forbidden; every request channel has `can_send_request`
  False and `ctx.session.create_message()` raises `NoBackChannelError` (an `INVALID_REQUEST` error).
  The SDK implements the multi-round-trip flow instead (SEP-2322): the tool returns
  `InputRequiredResult(input_requests={key: CreateMessageRequest | ElicitRequest})`, which goes on
  the wire as a `tools/call` result with `resultType: "input_required"`; the SDK `Client` runs its
  sampling/elicitation callback for each key and re-sends the same `tools/call` with
  `inputResponses`, which the tool reads from `ctx.input_responses`. `ask` uses that path, so one
  `ask` call is two `tools/call` exchanges on the wire. It sends no `requestState`: the SDK seals
  that with a per-process key, and a sealed state would make recorded second rounds unreplayable
  against a restarted server.
- Capabilities come from `ctx.client_capabilities` in both eras (the `initialize` params, or the
  `io.modelcontextprotocol/clientCapabilities` entry of each request's `_meta`). Handshake-era
  stateless HTTP never sees the client's `initialize`, so capabilities are None there.

Other SDK behaviour worth knowing when reading traces of this server:

- The 2026-07-28 era works on every transport, legacy HTTP+SSE and stdio included: an `auto` client
  speaks it wherever this server runs.
- With `json_response=True` progress notifications are dropped in both eras (a JSON body carries
  only the result); with SSE answers and on stdio they arrive.
- `ToolError("x")` becomes `isError: true` with the text `Error executing tool <name>: x`.

`mcp` is slow to import, so only this module imports it; the CLI imports this module lazily.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Final

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from mcpbench import __version__
from mcpbench.lab.peers.quirks import Quirks
from mcpbench.lab.peers.slowdown import Slowdown, slowed
from mcpbench.protocol.transports import TRANSPORTS

if TYPE_CHECKING:
    from mcpbench.lab.peers.auth_server import LabAuth
    from mcpbench.lab.peers.tasks import Tasks

SERVER_NAME: Final = "mcpbench-reference"
DEFAULT_HOST: Final = "127.0.0.1"  # loopback only: a lab server must not be reachable from the network
DEFAULT_PORT: Final = 8000

# A load run or replay must never hang on one call longer than a test's time budget (120 s):
# 30 s is long enough to hold streams open for interesting traces.
MAX_SLOW_SECONDS: Final = 30.0
# Each step sends one progress notification; 1,000 of them is plenty to exercise a recorder
# without letting one call flood the stream.
MAX_SLOW_STEPS: Final = 1000
# 16 MiB exercises large-body handling in recorders and proxies while keeping a single call's
# memory bounded (the SDK holds the whole result, plus its JSON encoding, in memory).
MAX_BIG_BYTES: Final = 16 * 1024 * 1024
# The payload `big` repeats: varied text, so truncation or reordering shows up in comparisons.
BIG_PATTERN: Final = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_"
GREETING_URI: Final = "mcpbench://greeting"
# The tool `toggle_tool` adds and removes.
EXTRA_TOOL: Final = "extra"
GREETING_TEXT: Final = "hello from mcpbench"

# The key under which `ask` files its single input request in an `InputRequiredResult`.
ASK_INPUT_KEY: Final = "ask"
# Sampling requires a token budget; a reference answer needs few.
ASK_MAX_TOKENS: Final = 256
# Form elicitation: one string field holding the answer.
ASK_ANSWER_FIELD: Final = "answer"
ASK_ELICIT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {ASK_ANSWER_FIELD: {"type": "string", "description": "Your answer"}},
    "required": [ASK_ANSWER_FIELD],
}
ASK_NEITHER_TEXT: Final = "the client declared neither sampling nor elicitation"
ASK_NO_BACK_CHANNEL_TEXT: Final = (
    "cannot ask: this connection has no back-channel for server-to-client requests "
    "(JSON responses or stateless HTTP)"
)


def big_payload(size: int) -> str:
    """The `size`-byte ASCII text `big` returns."""
    repeats, rest = divmod(size, len(BIG_PATTERN))
    return BIG_PATTERN * repeats + BIG_PATTERN[:rest]


def _ask_request(question: str, caps: ClientCapabilities | None) -> CreateMessageRequest | ElicitRequest | None:
    """The request `ask` puts to the client: sampling first, else form elicitation, else None."""
    if caps is None:
        return None
    if caps.sampling is not None:
        params = CreateMessageRequestParams(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=question))],
            max_tokens=ASK_MAX_TOKENS,
        )
        return CreateMessageRequest(params=params)
    # A bare `elicitation: {}` (the only shape before modes existed) means form support; url-only does not.
    if caps.elicitation is not None and (caps.elicitation.form is not None or caps.elicitation.url is None):
        return ElicitRequest(params=ElicitRequestFormParams(message=question, requested_schema=ASK_ELICIT_SCHEMA))
    return None


def _answer_text(request: CreateMessageRequest | ElicitRequest, answer: object) -> str:
    """The text `ask` returns for the client's answer to `request`."""
    if isinstance(request, CreateMessageRequest):
        if not isinstance(answer, CreateMessageResult | CreateMessageResultWithTools):
            raise ToolError(f"expected a sampling result, got {type(answer).__name__}")
        blocks = answer.content if isinstance(answer.content, list) else [answer.content]
        texts = [block.text for block in blocks if isinstance(block, TextContent)]
        return "\n".join(texts) if texts else f"(sampling answered without text: {answer.model})"
    if not isinstance(answer, ElicitResult):
        raise ToolError(f"expected an elicitation result, got {type(answer).__name__}")
    if answer.action != "accept":
        return f"(the user chose {answer.action})"
    return str((answer.content or {}).get(ASK_ANSWER_FIELD, ""))


def build_server(auth: "LabAuth | None" = None, slowdowns: "Sequence[Slowdown]" = (), tasks: "bool | Tasks" = False) -> MCPServer:
    """The reference server, with its tools, resource and prompt registered (protected as `auth` says,
    `slowdowns` making tools slower on purpose: `lab/peers/slowdown.py`; `tasks`: the tool `work`,
    which runs as a task when asked, `lab/peers/tasks.py`; a `Tasks` of the caller's to serve them)."""
    # WARNING, not the SDK's INFO: INFO makes uvicorn log every request, which costs CPU under load
    # and fills the stderr of servers that tests start.
    protection = {} if auth is None else {"auth": auth.settings(), "token_verifier": auth.verifier}
    runtime = {}
    if tasks:
        from mcpbench.lab.peers.tasks import Tasks

        runtime = {"middleware": [tasks if isinstance(tasks, Tasks) else Tasks()]}
    server = MCPServer(SERVER_NAME, version=__version__, log_level="WARNING", **protection, **runtime)
    if auth is not None:
        auth.install(server)
    slower = {s.tool: s for s in slowdowns}

    def tool(**options: Any):
        """`server.tool`, with the tool made slower when a slowdown names it."""
        return lambda fn: server.tool(**options)(slowed(fn, slower.get(fn.__name__)))

    @tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tool()
    async def slow(
        ctx: Context,
        seconds: Annotated[float, Field(ge=0, le=MAX_SLOW_SECONDS)] = 0.2,
        steps: Annotated[int, Field(ge=1, le=MAX_SLOW_STEPS)] = 4,
    ) -> str:
        """Sleep `seconds` in `steps` parts, reporting progress after each part."""
        for step in range(1, steps + 1):
            await anyio.sleep(seconds / steps)
            # A no-op unless the caller sent a progressToken.
            await ctx.report_progress(step, steps, f"step {step}/{steps}")
        return f"slept {seconds:g}s in {steps} steps"

    @tool()
    def fail(message: str = "this tool always fails") -> str:
        """Always fail: the result carries isError: true and the message."""
        # ToolError is the SDK's "anticipated failure": an isError result, not a JSON-RPC error.
        raise ToolError(message)

    # Without structured output the payload is on the wire once (in `content`), not twice
    # (`content` plus `structuredContent`), so `size` is what a recorder sees.
    @tool(structured_output=False)
    def big(size: Annotated[int, Field(ge=0, le=MAX_BIG_BYTES)] = 65536) -> str:
        """Return `size` bytes of ASCII text."""
        return big_payload(size)

    @tool()
    async def ask(question: str, ctx: Context) -> str | InputRequiredResult:
        """Ask the client: sampling if declared, else elicitation, else say neither is supported."""
        request = _ask_request(question, ctx.client_capabilities)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            if request is None:
                return ASK_NEITHER_TEXT
            # 2026-07-28: no server-to-client requests; ask in the result and read the answer
            # from the retried call (see the module docstring).
            answer = (ctx.input_responses or {}).get(ASK_INPUT_KEY)
            if answer is None:
                return InputRequiredResult(input_requests={ASK_INPUT_KEY: request})
            return _answer_text(request, answer)
        # Checked before the capabilities: stateless HTTP never sees the client's initialize,
        # so "declared neither" would be wrong there.
        if not ctx.session.can_send_request:
            return ASK_NO_BACK_CHANNEL_TEXT
        if request is None:
            return ASK_NEITHER_TEXT
        result_type = CreateMessageResult if isinstance(request, CreateMessageRequest) else ElicitResult
        # related_request_id routes the request onto this call's response stream (Streamable HTTP).
        answer = await ctx.session.send_request(
            request, result_type, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
        )
        return _answer_text(request, answer)

    # Text only and a short description: every tools/list answer carries it, and the recorders' size
    # targets (bytes per message of a recorded session) are measured on this server's list.
    @tool(structured_output=False)
    async def toggle_tool(ctx: Context) -> str:
        """Add or remove the tool `extra`."""
        # The catalogue is the server's, shared by its clients: a second call puts it back.
        if EXTRA_TOOL in {listed.name for listed in await server.list_tools()}:
            server.remove_tool(EXTRA_TOOL)
            done = f"removed {EXTRA_TOOL}"
        else:
            server.add_tool(lambda text: text, name=EXTRA_TOOL, description="Echo the text back (added by toggle_tool).")
            done = f"added {EXTRA_TOOL}"
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await ctx.notify_tools_changed()  # to the `subscriptions/listen` streams that asked for it
        else:
            await ctx.session.send_tool_list_changed()
        return done

    if tasks:
        from mcpbench.lab.peers.tasks import work

        tool(structured_output=False)(work)

    @server.resource(GREETING_URI, name="greeting", mime_type="text/plain")
    def greeting() -> str:
        """A fixed greeting."""
        return GREETING_TEXT

    @server.prompt()
    def summarize(topic: str) -> str:
        """Prompt that asks for a summary."""
        return f"Please summarize {topic}."

    return server


def serve(
    transport: str,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    json_response: bool = False,
    stateless: bool = False,
    resumable: bool = False,
    auth: "LabAuth | None" = None,
    request_log: str | None = None,
    quirks: "Quirks | None" = None,
    slowdowns: "Sequence[Slowdown]" = (),
    tasks: bool = False,
) -> None:
    """Run the reference server on `transport` until it is stopped (blocks).

    `host`/`port` apply to the HTTP transports; `json_response`/`stateless`/`resumable` to
    Streamable HTTP only (`resumable`: events kept for `Last-Event-ID`, `lab/peers/event_store.py`);
    `quirks` to both HTTP transports (`lab/peers/quirks.py`).
    `slowdowns`: tools made slower on purpose (`lab/peers/slowdown.py`); `tasks`: the tool `work`, as a task when asked.
    `auth`: the protection of the HTTP transports (`lab/peers/auth_server.py`); `request_log`: a file
    the HTTP transports append a line to per request (`lab/peers/request_log.py`).
    """
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}; expected one of {', '.join(TRANSPORTS)}")
    server = build_server(auth, slowdowns, tasks)
    if transport == "stdio":
        server.run(transport="stdio")
        return
    anyio.run(_serve_http, server, transport, host, port, json_response, stateless, resumable, quirks or Quirks(), request_log)


# The reconnect delay a resumable server suggests in its priming events (SSE `retry:`, in ms):
# short, so a client that resumes does so within a second of a cut.
RESUME_RETRY_MS: Final = 500


async def _serve_http(server: MCPServer, transport: str, host: str, port: int, json_response: bool, stateless: bool,
                      resumable: bool, quirks: Quirks, request_log: str | None) -> None:
    """An HTTP transport as `MCPServer.run` serves it, plus the event store and the quirks asked for,
    and the request log when asked."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from mcpbench.lab.peers.event_store import MemoryEventStore, SessionScopes
    from mcpbench.lab.peers.request_log import RequestLog

    # None: the SDK's own choice (DNS-rebinding protection on for a loopback host)
    security = None if quirks.host_check else TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if transport == "sse":
        app = server.sse_app(transport_security=security, host=host)
    else:
        store = dict(event_store=MemoryEventStore(leaky=quirks.leaky_events), retry_interval=RESUME_RETRY_MS) if resumable else {}
        limit = {"max_sessions": quirks.max_sessions} if quirks.max_sessions is not None else {}
        app = server.streamable_http_app(json_response=json_response, stateless_http=stateless, transport_security=security,
                                         host=host, **store, **limit)
        app = SessionScopes(app) if resumable else app
    app = quirks.wrap(app)
    if request_log:
        app = RequestLog(app, request_log)  # outermost: it sees every request, the quirks' refusals too
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    await uvicorn.Server(config).serve()
