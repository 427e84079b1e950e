"""Shared fixtures: stdio recordings of the reference server, made once per test session.

A recording is the official SDK client driving `mcpbench tee -- mcpbench lab serve --transport stdio`,
in both eras: `mode="legacy"` (2025-11-25 handshake) and `mode="auto"` (2026-07-28 against this server).
"""

import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.support.servers import REPO_ROOT, serve_argv, stdio_params

# Whole-recording budget inside the event loop: the stdio server takes ~2 s to start on 2 cores.
RECORD_TIMEOUT: Final = 60.0
# The script every recording runs: catalogue, plain tools, isError, progress, sampling, resource, prompt.
QUESTION: Final = "what is replay?"
SAMPLED_PREFIX: Final = "sampled: "
MODES: Final = ("legacy", "auto")
VARIANT_SERVER: Final = Path(__file__).with_name("variant_server.py")


async def sample(_ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    question = params.messages[0].content
    assert isinstance(question, types.TextContent)
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=SAMPLED_PREFIX + question.text), model="test"
    )


async def _on_progress(value: float, total: float | None, message: str | None) -> None:
    pass


async def drive(client: Client) -> None:
    """The recorded session's client side."""
    await client.list_tools()
    await client.call_tool("echo", {"text": "héllo"})
    await client.call_tool("add", {"a": 2, "b": 40})
    await client.call_tool("fail", {"message": "boom"})
    await client.call_tool("slow", {"seconds": 0.05, "steps": 2}, progress_callback=_on_progress)
    await client.call_tool("ask", {"question": QUESTION})
    await client.read_resource("mcpbench://greeting")
    await client.get_prompt("summarize", {"topic": "MCP"})


def tee_argv(out: Path, server_argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "mcpbench", "tee", "--out", str(out), "--", *server_argv]


def record(out: Path, mode: str) -> Path:
    """Record one session of the reference server over stdio through the tee."""

    async def body() -> None:
        with anyio.fail_after(RECORD_TIMEOUT):
            async with Client(stdio_params(tee_argv(out, serve_argv("stdio"))), mode=mode, sampling_callback=sample) as client:
                await drive(client)

    anyio.run(body)
    assert out.exists() and out.stat().st_size > 0
    return out


@pytest.fixture(scope="session")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"legacy": trace, "auto": trace}: one stdio recording per era."""
    folder = tmp_path_factory.mktemp("recordings")
    return {mode: record(folder / f"{mode}.jsonl", mode) for mode in MODES}


def stdio_target(*extra: str) -> str:
    """The reference server as a replay TARGET string."""
    return "stdio:" + subprocess.list2cmdline(serve_argv("stdio")) + "".join(" " + e for e in extra)


def variant_target(mode: str) -> str:
    """The reference server with one change (see variant_server.py) as a TARGET string."""
    return "stdio:" + subprocess.list2cmdline([sys.executable, str(VARIANT_SERVER), mode])


def cli(*args: str, timeout: float = 90.0) -> subprocess.CompletedProcess:
    """Run `python -m mcpbench ARGS`."""
    return subprocess.run(
        [sys.executable, "-m", "mcpbench", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout
    )
