"""The reference server's `toggle_tool` on a 2026-07-28 `subscriptions/listen` stream, recorded through
the tee by the official SDK client, as the trace model sees it: a stream of its own (opened,
acknowledged, its tools list_changed notification, closed by the client), never an unanswered call."""

import json

import anyio
import pytest
from click.testing import CliRunner

from mcpbench.analysis.inspect import render, summarize
from mcpbench.cli import main
from tests.support.recordings import tee_argv
from tests.support.servers import serve_argv, stdio_params
from tests.support.views import assert_views_agree

SESSION_TIMEOUT = 60.0


async def listen_and_toggle(params) -> tuple[str, list[str]]:
    from mcp import Client

    with anyio.fail_after(SESSION_TIMEOUT):
        async with Client(params) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                said = (await client.call_tool("toggle_tool", {})).content[0].text
                async for _ in subscription:
                    break  # the change arrived on the stream; leaving closes it
            return said, sorted(tool.name for tool in (await client.list_tools()).tools)


@pytest.mark.slow  # a stdio server through the tee
def test_a_listen_stream_and_the_tool_list_it_announces(tmp_path):
    trace = tmp_path / "listen.jsonl"
    said, tools = anyio.run(listen_and_toggle, stdio_params(tee_argv(trace, serve_argv("stdio"))))
    assert said == "added extra" and "extra" in tools
    assert_views_agree(trace)  # replay's plan and the other views too
    (session,) = summarize(trace).sessions
    (listening,) = [op for op in session.operations if op.stream is not None]
    stream = listening.stream
    assert stream.acknowledged is not None and stream.closed is not None and listening.outcome == "closed"
    assert [method for _, method in stream.notifications] == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed"]
    assert "listen stream: acknowledged after" in render(summarize(trace)) and "1 tools/list_changed" in render(summarize(trace))
    report = json.loads(CliRunner().invoke(main, ["inspect", "--json", str(trace)]).output)
    assert report["methods"]["subscriptions/listen"]["outcomes"] == {"closed": 1}  # not "unanswered"
    assert report["streams"][0]["ending"] == "closed"
