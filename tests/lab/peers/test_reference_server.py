"""The reference server, driven by the official SDK client over every transport, in both eras.

`Client(mode="auto")` probes `server/discover` and speaks 2026-07-28 to this server, also over
legacy HTTP+SSE and stdio; `mode="legacy"` forces the 2025-11-25 handshake. The HTTP configurations are
the session's servers (tests/conftest.py); a stdio server lives as long as its client.
"""

from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
import mcp_types as types
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.sse import sse_client

from mcpbench.lab.cli import lab
from mcpbench.lab.peers.reference_server import (
    ASK_ELICIT_SCHEMA,
    ASK_INPUT_KEY,
    ASK_NEITHER_TEXT,
    ASK_NO_BACK_CHANNEL_TEXT,
    GREETING_TEXT,
    GREETING_URI,
    MAX_SLOW_SECONDS,
    SERVER_NAME,
    big_payload,
)
from tests.support.mcp_client import SAMPLED_PREFIX, sample
from tests.support.servers import (
    RunningServer,
    ServerStartError,
    free_port,
    serve_argv,
    stdio_params,
    wait_for_port,
)

# Whole-test budget inside the event loop: a stdio server takes about 2 s to start on 2 cores,
# every call here takes well under a second; pytest-timeout (120 s) is the outer net.
TEST_TIMEOUT: Final = 30.0

# name -> the session fixture of that server (stdio: a command per client)
CONFIGS: Final[dict[str, str | None]] = {
    "stdio": None,
    "sse": "sse_server",
    "http": "http_server",
    "http-json": "json_http_server",
    "http-stateless": "stateless_http_server",
}
MODES: Final = ("auto", "legacy")
ERA_OF_MODE: Final = {"auto": "2026-07-28", "legacy": "2025-11-25"}
TOOLS: Final = {"echo", "add", "slow", "fail", "big", "ask", "toggle_tool"}
# Under the streamable-HTTP SDK client's 1 MiB cap on one SSE event, with the JSON framing around it.
BIG_SIZE: Final = 200_000
SLOW_STEPS: Final = 3
ELICITED_ANSWER: Final = "forty-two"


class Peer:
    """One server configuration: builds a fresh SDK client target per connection."""

    def __init__(self, name: str, server: RunningServer | list[str]) -> None:
        self.name = name
        self.server = server

    def target(self) -> Any:
        if isinstance(self.server, list):
            return stdio_params(self.server)
        if self.server.transport == "sse":
            return sse_client(self.server.url)  # a transport context manager: one per client
        return self.server.url


def peer_named(name: str, request: pytest.FixtureRequest) -> Peer:
    fixture = CONFIGS[name]
    return Peer(name, serve_argv("stdio") if fixture is None else request.getfixturevalue(fixture))


@pytest.fixture(params=list(CONFIGS))
def peer(request: pytest.FixtureRequest) -> Peer:
    return peer_named(request.param, request)


@pytest.fixture
def http_peer(request: pytest.FixtureRequest) -> Peer:
    """The plain Streamable HTTP server (SSE answers, sessions), for single-configuration tests."""
    return peer_named("http", request)


def run(body: Callable[[], Awaitable[None]]) -> None:
    """Run an async test body in a fresh event loop, bounded by TEST_TIMEOUT."""

    async def bounded() -> None:
        with anyio.fail_after(TEST_TIMEOUT):
            await body()

    anyio.run(bounded)


async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """An elicitation callback standing in for a user who fills in the form."""
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.requested_schema == ASK_ELICIT_SCHEMA
    return types.ElicitResult(action="accept", content={"answer": ELICITED_ANSWER})


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent), result.content
    return result.content[0].text


@pytest.mark.parametrize("mode", MODES)
def test_round_trip(peer: Peer, mode: str) -> None:
    """Catalogue, plain tools, isError, a big payload, progress, resource and prompt on one connection."""

    async def body() -> None:
        async with Client(peer.target(), mode=mode) as client:
            assert client.protocol_version == ERA_OF_MODE[mode]
            assert client.server_info is not None and client.server_info.name == SERVER_NAME

            listed = await client.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS

            echoed = await client.call_tool("echo", {"text": "héllo"})
            assert (text_of(echoed), echoed.is_error) == ("héllo", False)
            assert echoed.structured_content == {"result": "héllo"}
            added = await client.call_tool("add", {"a": 2, "b": 40})
            assert added.structured_content == {"result": 42}

            failed = await client.call_tool("fail", {"message": "boom"})
            assert failed.is_error is True
            assert "boom" in text_of(failed)

            big = await client.call_tool("big", {"size": BIG_SIZE})
            assert text_of(big) == big_payload(BIG_SIZE) and len(text_of(big).encode()) == BIG_SIZE
            assert big.structured_content is None  # the payload is on the wire once

            progress: list[tuple[float, float | None, str | None]] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, total, message))

            slow = await client.call_tool("slow", {"seconds": 0.05, "steps": SLOW_STEPS}, progress_callback=on_progress)
            assert slow.is_error is False
            if peer.name == "http-json":
                # A JSON response body carries only the result: the SDK drops the notifications.
                assert progress == []
            else:
                assert [(v, t) for v, t, _ in progress] == [(step, SLOW_STEPS) for step in range(1, SLOW_STEPS + 1)]

            resource = await client.read_resource(GREETING_URI)
            (contents,) = resource.contents
            assert isinstance(contents, types.TextResourceContents)
            assert (contents.text, contents.mime_type) == (GREETING_TEXT, "text/plain")

            prompt = await client.get_prompt("summarize", {"topic": "MCP"})
            (message,) = prompt.messages
            assert isinstance(message.content, types.TextContent) and message.content.text == "Please summarize MCP."

    run(body)


def expected_sampled_answer(config: str, mode: str, question: str) -> str:
    """What `ask` answers a client with a sampling callback."""
    if mode == "legacy" and config in ("http-json", "http-stateless"):
        # Handshake era without a back-channel: the server cannot send sampling/createMessage.
        return ASK_NO_BACK_CHANNEL_TEXT
    return SAMPLED_PREFIX + question


@pytest.mark.parametrize("mode", MODES)
def test_ask_with_sampling(peer: Peer, mode: str) -> None:
    """Handshake era: a server→client request; 2026-07-28: an input_required round, on every transport."""
    question = f"what is {peer.name}?"

    async def body() -> None:
        async with Client(peer.target(), mode=mode, sampling_callback=sample) as client:
            answer = await client.call_tool("ask", {"question": question})
            assert (text_of(answer), answer.is_error) == (expected_sampled_answer(peer.name, mode, question), False)

    run(body)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("callbacks", "expected"),
    [({"elicitation_callback": elicit}, ELICITED_ANSWER), ({}, ASK_NEITHER_TEXT)],
    ids=["elicitation", "neither"],
)
def test_ask_falls_back(http_peer: Peer, mode: str, callbacks: dict[str, Any], expected: str) -> None:
    """Without sampling, `ask` elicits; with neither capability it says so instead of failing."""

    async def body() -> None:
        async with Client(http_peer.target(), mode=mode, **callbacks) as client:
            answer = await client.call_tool("ask", {"question": "the answer?"})
            assert (text_of(answer), answer.is_error) == (expected, False)

    run(body)


def test_ask_in_2026_is_an_input_required_round(http_peer: Peer) -> None:
    """2026-07-28: the first tools/call returns input_required with the sampling request; the retry answers."""

    async def body() -> None:
        async with Client(http_peer.target(), mode="auto", sampling_callback=sample) as client:
            first = await client.session.call_tool("ask", {"question": "q?"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert first.request_state is None  # nothing sealed: a recorded retry replays on any server
            assert set(first.input_requests or {}) == {ASK_INPUT_KEY}
            request = first.input_requests[ASK_INPUT_KEY]
            assert isinstance(request, types.CreateMessageRequest)
            assert request.params.messages[0].content == types.TextContent(type="text", text="q?")

            sampled = await sample(None, request.params)
            second = await client.session.call_tool(
                "ask", {"question": "q?"}, input_responses={ASK_INPUT_KEY: sampled}, allow_input_required=True
            )
            assert isinstance(second, types.CallToolResult)
            assert text_of(second) == SAMPLED_PREFIX + "q?"

    run(body)


def test_limits_are_in_the_schema_and_enforced(http_peer: Peer) -> None:
    """Arguments beyond the named caps are rejected as isError results, not run."""

    async def body() -> None:
        async with Client(http_peer.target(), mode="legacy") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert tools["slow"].input_schema["properties"]["seconds"]["maximum"] == MAX_SLOW_SECONDS
            too_slow = await client.call_tool("slow", {"seconds": MAX_SLOW_SECONDS + 1})
            assert too_slow.is_error is True
            negative = await client.call_tool("big", {"size": -1})
            assert negative.is_error is True

    run(body)


def test_startup_line_names_the_url(http_peer: Peer) -> None:
    assert isinstance(http_peer.server, RunningServer)
    assert f"mcpbench: reference server (streamable-http) on {http_peer.server.url}" in http_peer.server.stderr()


def test_unknown_transport_is_a_usage_error() -> None:
    result = CliRunner().invoke(lab, ["serve", "--transport", "carrier-pigeon"])
    assert result.exit_code == 2
    assert "carrier-pigeon" in result.output


def test_json_response_needs_streamable_http() -> None:
    result = CliRunner().invoke(lab, ["serve", "--transport", "sse", "--json-response"])
    assert result.exit_code == 2


def test_wait_for_port_gives_up_with_a_clear_message() -> None:
    port = free_port()  # nothing listens on it
    with pytest.raises(ServerStartError, match=f"nothing accepted on 127.0.0.1:{port} within 0.2 s"):
        wait_for_port("127.0.0.1", port, 0.2)
