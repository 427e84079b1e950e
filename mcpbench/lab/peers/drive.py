"""Drive a representative session with the official SDK client (asyncio, in this process).

Used by the main job and by tests: every tool of the reference server, its
resource and prompt, with a sampling callback so `ask` round-trips.
"""

from typing import Any

SESSION_TIMEOUT = 60.0
SAMPLED_TEXT = "sampled by mcpbench"
ASK_QUESTION = "ready?"  # the session asks `ask` this; SAMPLED_TEXT answers it


def sdk_target(target: Any, transport: str = "streamable-http") -> Any:
    """What `mcp.Client` takes: a URL (Streamable HTTP), `sse_client(url)` (legacy SSE) or stdio params."""
    if transport == "sse":
        from mcp.client.sse import sse_client

        return sse_client(target)
    return target


async def sampling_stub(context: Any, params: Any) -> Any:
    """The session's sampling callback: SAMPLED_TEXT, whatever the question (a client of a recording answers alike)."""
    from mcp.types import CreateMessageResult, TextContent

    return CreateMessageResult(role="assistant", content=TextContent(type="text", text=SAMPLED_TEXT), model="mcpbench-stub")


async def _session(target: Any, mode: str) -> dict[str, Any]:
    from mcp import Client

    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    results: dict[str, Any] = {}
    async with Client(target, mode=mode, sampling_callback=sampling_stub) as client:
        results["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
        results["echo"] = (await client.call_tool("echo", {"text": "héllo"})).model_dump(mode="json")
        results["add"] = (await client.call_tool("add", {"a": 2, "b": 40})).model_dump(mode="json")
        results["fail"] = (await client.call_tool("fail", {})).model_dump(mode="json")
        results["big"] = len((await client.call_tool("big", {"size": 100_000})).content[0].text)
        slow = await client.call_tool("slow", {"seconds": 0.05, "steps": 2}, progress_callback=on_progress)
        results["slow"] = slow.model_dump(mode="json")
        results["ask"] = (await client.call_tool("ask", {"question": ASK_QUESTION})).model_dump(mode="json")
        results["resource"] = (await client.read_resource("mcpbench://greeting")).model_dump(mode="json")
        results["prompt"] = (await client.get_prompt("summarize", {"topic": "MCP"})).model_dump(mode="json")
        results["protocol_version"] = client.protocol_version
    results["progress"] = progress
    return results


def drive(target: Any, mode: str = "auto") -> dict[str, Any]:
    """Run one bounded session against `target`; return what the client got back.

    Args:
        target: a URL, an SDK transport, or `StdioServerParameters`.
        mode: the SDK client's `auto` (2026-07-28 when the server speaks it) or `legacy` (handshake).
    """
    import anyio

    async def bounded() -> dict[str, Any]:
        with anyio.fail_after(SESSION_TIMEOUT):
            return await _session(target, mode)

    return anyio.run(bounded)
