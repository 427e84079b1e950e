"""`serve-trace`: the official SDK client against the mock, on every transport and in both eras."""

import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError

from mcpbench.lab.peers.drive import ASK_QUESTION, SAMPLED_TEXT, sampling_stub
from mcpbench.protocol.jsonrpc import Request
from mcpbench.replay import plan as plans
from mcpbench.replay.serve_trace import NOT_RECORDED, TraceAnswers
from mcpbench.replay.mock_answers import UNANSWERED
from tests.replay.helpers import TIMEOUT, cli, mock_server, text_of
from tests.support.recordings import MODES
from tests.support.servers import stdio_params
from tests.support.traces import header, result, sent, write_trace


async def check_client(target: Any, mode: str) -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(target, mode=mode, sampling_callback=sampling_stub) as client:  # answers as the recording did
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            tools = await client.list_tools()
            assert [tool.name for tool in tools.tools] == ["echo", "add", "slow", "fail", "big", "ask", "toggle_tool"]
            assert text_of(await client.call_tool("echo", {"text": "héllo"})) == "héllo"
            assert (await client.call_tool("fail", {})).is_error is True
            assert text_of(await client.call_tool("ask", {"question": ASK_QUESTION})) == SAMPLED_TEXT
            with pytest.raises(MCPError) as miss:
                await client.call_tool("echo", {"text": "never recorded"})
            assert miss.value.error.code == NOT_RECORDED and "nearest recorded request" in miss.value.error.message
            assert "héllo" in miss.value.error.message
            prompt = await client.get_prompt("summarize", {"topic": "MCP"})
            assert prompt.messages[0].content.text == "Please summarize MCP."


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", ["stdio", "streamable-http", "sse"])
def test_sdk_client_gets_the_recorded_answers(recordings, transport, mode):
    trace = recordings[mode]
    if transport == "stdio":
        argv = [sys.executable, "-m", "mcpbench", "serve-trace", str(trace)]
        anyio.run(check_client, stdio_params(argv), mode)
        return
    with mock_server(trace, transport) as url:
        anyio.run(check_client, sse_client(url) if transport == "sse" else url, mode)


def test_replaying_against_the_mock_of_the_same_trace_is_identical(recordings, tmp_path):
    for mode in MODES:
        with mock_server(recordings[mode], "streamable-http") as url:
            done = cli("replay", str(recordings[mode]), "--target", url)
            assert done.returncode == 0, done.stdout + done.stderr


def test_repeated_identical_calls_are_answered_in_recorded_order(tmp_path):
    events = []
    for i, text in enumerate(["first", "second"]):
        events += [sent(2.0 + i, i + 1, "tools/call", {"name": "clock"}, session="s"),
                   result(2.5 + i, i + 1, {"content": [{"type": "text", "text": text}]}, session="s")]
    path = write_trace(tmp_path / "t.jsonl", events, header=header())
    answers = TraceAnswers(plans.load(path))
    ask = Request(id=99, method="tools/call", params={"name": "clock", "_meta": {"progressToken": 7}})
    texts = [answers.lookup(ask).answer["result"]["content"][0]["text"] for _ in range(3)]
    assert texts == ["first", "second", "second"]  # in order, then the last one again
    miss = answers.miss(Request(id=5, method="tools/call", params={"name": "clock2"}))
    assert miss.data["nearest"]["params"] == {"name": "clock"}


def test_a_call_recorded_failed_after_an_elicitation_still_elicits(tmp_path, http_server):
    # Recorded through `record`: the server elicits mid-call and the exchange fails (the recorder
    # stops while the user has not answered). The mock served what it had answers for only: the call
    # got "not recorded" and no elicitation. Now it elicits as recorded, then fails the call.
    from tests.record.helpers import record_proxy
    from tests.support.servers import stop_process

    trace = tmp_path / "failed-ask.jsonl"
    elicited: list[str] = []
    recorder = None

    async def never(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        elicited.append(params.message)
        await anyio.to_thread.run_sync(stop_process, recorder)  # SIGTERM: the exchange ends failed, in the trace
        await anyio.sleep(TIMEOUT)  # the user never answers; the client gives up first
        raise AssertionError("not reached")

    async def answer(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        elicited.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "42"})

    async def give_up(url: str) -> None:
        with anyio.fail_after(TIMEOUT):
            async with Client(url, mode="legacy", elicitation_callback=never) as client:
                with anyio.move_on_after(2):
                    await client.call_tool("ask", {"question": "the answer?"})

    async def against_mock(url: str) -> MCPError:
        with anyio.fail_after(TIMEOUT):
            async with Client(url, mode="legacy", elicitation_callback=answer) as client:
                with pytest.raises(MCPError) as failed:
                    await client.call_tool("ask", {"question": "the answer?"})
                return failed.value

    with record_proxy(http_server.url, trace) as (url, recorder):
        with pytest.raises(BaseExceptionGroup) as broke:  # the recorder is gone: the client's session breaks
            anyio.run(give_up, url)
    assert broke.group_contains(MCPError, match="SSE stream ended without a response")
    assert elicited == ["the answer?"]
    (call,) = [c for s in plans.load(trace).sessions for c in s.calls if c.method == "tools/call"]
    assert call.answer is None and [item.method for _, item in call.server] == ["elicitation/create"]
    with mock_server(trace, "streamable-http") as url:
        error = anyio.run(against_mock, url)
    assert elicited == ["the answer?", "the answer?"]  # the mock elicited as the server did
    assert error.error.code == UNANSWERED and "the recorded call failed" in error.error.message
