"""Small example projects that use the pytest plugin, run by `pytester` in a subprocess of their own.

The client-code project drives the reference server with the official SDK client through `mcp_mock`,
one test per transport and era (`EXAMPLE_TRANSPORTS`, `EXAMPLE_MODES` pick some); `EXAMPLE_TEXT` is
what it echoes (a new request when it changes); `EXAMPLE_SERVER_GONE=1` points every real server at
a command that does not exist, so a run that passes so has not needed one. The server-code project
replays traces against `EXAMPLE_SERVER` with `mcp_replay`.
"""

import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from mcpbench.lab.peers import variant_server

# A pytester run's own bound (pytest startup, SDK import, servers and recorders started per test).
RUN_TIMEOUT: Final = 240.0

CLIENT_PROJECT: Final = '''
import os, sys

import anyio
import pytest
from mcp import Client

TEXT = os.environ.get("EXAMPLE_TEXT", "hi")
GONE = os.environ.get("EXAMPLE_SERVER_GONE") == "1"
SERVE = [sys.executable, "-m", "mcpbench", "lab", "serve", "--transport"]
NOWHERE = ["/nonexistent/mcp-server"]


def real_server(transport):
    if transport == "stdio":
        return {"server": "stdio:" + " ".join(NOWHERE if GONE else SERVE + ["stdio"])}
    path = "sse" if transport == "sse" else "mcp"
    scheme = "sse+http" if transport == "sse" else "http"
    command = NOWHERE if GONE else SERVE + [transport, "--port", "{port}"]
    return {"server": f"{scheme}://127.0.0.1:{{port}}/{path}", "command": command}


@pytest.fixture
def mcp_config(request):
    return real_server(request.node.callspec.params["transport"])


async def session(target, mode):
    with anyio.fail_after(30):
        async with Client(target, mode=mode) as client:
            tools = sorted(tool.name for tool in (await client.list_tools()).tools)
            echo = await client.call_tool("echo", {"text": TEXT})
            return tools, echo.content[0].text


@pytest.mark.parametrize("mode", os.environ.get("EXAMPLE_MODES", "legacy auto").split())
@pytest.mark.parametrize("transport", os.environ.get("EXAMPLE_TRANSPORTS", "stdio streamable-http sse").split())
def test_client(mcp_mock, transport, mode):
    assert mcp_mock.transport == transport
    tools, text = anyio.run(session, mcp_mock.sdk_target(), mode)
    assert "echo" in tools and text == TEXT
'''

# The same project with FastMCP's client: its transports built from the mock's URL or command.
FASTMCP_PROJECT: Final = CLIENT_PROJECT.replace("from mcp import Client", """from fastmcp import Client
from fastmcp.client.transports import SSETransport, StdioTransport, StreamableHttpTransport""").replace(
    "async with Client(target, mode=mode) as client:", "async with Client(fastmcp_transport(target), mode=mode) as client:").replace(
    "tools = sorted(tool.name for tool in (await client.list_tools()).tools)",
    "tools = sorted(tool.name for tool in await client.list_tools())").replace(
    "anyio.run(session, mcp_mock.sdk_target(), mode)", "anyio.run(session, mcp_mock, mode)") + """

def fastmcp_transport(mock):
    if mock.transport == "stdio":
        return StdioTransport(mock.command, mock.args)
    return SSETransport(mock.url) if mock.transport == "sse" else StreamableHttpTransport(mock.url)
"""

SERVER_PROJECT: Final = '''
import os

import pytest

SERVER = os.environ["EXAMPLE_SERVER"]


@pytest.mark.mcp_trace("legacy.jsonl", server=SERVER)
def test_legacy_session(mcp_replay):
    mcp_replay()


@pytest.mark.mcp_trace("auto.jsonl", server=SERVER)
def test_auto_session(mcp_replay):
    mcp_replay()
'''


def client_project(pytester: pytest.Pytester, source: str = CLIENT_PROJECT) -> Path:
    """The client-code project (or `source`, another client's); returns the folder its traces go to."""
    pytester.makepyfile(test_example=source)
    return pytester.path / "mcp_traces" / "test_example"


def server_project(pytester: pytest.Pytester, recordings: dict[str, Path]) -> Path:
    """The server-code project with the session's stdio recordings as its traces; returns their folder."""
    pytester.makepyfile(test_server=SERVER_PROJECT)
    folder = pytester.path / "mcp_traces" / "test_server"
    folder.mkdir(parents=True)
    for era, path in recordings.items():
        (folder / f"{era}.jsonl").write_bytes(path.read_bytes())
    return folder


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in a subprocess (the plugin loads through its entry point), bounded.

    Without Hypothesis's plugin: the example projects use none of it, and its terminal summary imports
    all of Hypothesis, 1.2 s of CPU in each of the suite's twenty-odd runs."""
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args, timeout=RUN_TIMEOUT)


def stdio_command(module: str, *args: str) -> str:
    return "stdio:" + subprocess.list2cmdline([sys.executable, "-m", module, *args])


REFERENCE: Final = stdio_command("mcpbench", "lab", "serve", "--transport", "stdio")
VARIANT: Final = stdio_command(variant_server.__name__, "echo-text")  # echo answers gain a suffix
