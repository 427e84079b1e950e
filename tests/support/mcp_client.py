"""Run a fixed session with the official SDK client, returning what it got back."""

import anyio

SESSION_TIMEOUT = 60.0


async def _session(target, mode: str) -> dict:
    from mcp import Client

    results: dict = {}
    progress: list = []

    async def on_progress(progress_value, total, message):
        progress.append(progress_value)

    async with Client(target, mode=mode) as client:
        results["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
        results["echo"] = (await client.call_tool("echo", {"text": "héllo"})).model_dump(mode="json")
        results["add"] = (await client.call_tool("add", {"a": 2, "b": 40})).model_dump(mode="json")
        results["fail"] = (await client.call_tool("fail", {})).model_dump(mode="json")
        results["big"] = len((await client.call_tool("big", {"size": 100_000})).content[0].text)
        results["slow"] = (await client.call_tool("slow", {"seconds": 0.05, "steps": 2}, progress_callback=on_progress)).model_dump(mode="json")
        results["resource"] = (await client.read_resource("mcpbench://greeting")).model_dump(mode="json")
        results["prompt"] = (await client.get_prompt("summarize", {"topic": "MCP"})).model_dump(mode="json")
        results["protocol_version"] = client.protocol_version
    results["progress"] = progress
    return results


def run_session(target, mode: str = "auto") -> dict:
    """One bounded session against `target` (URL or StdioServerParameters)."""

    async def bounded():
        with anyio.fail_after(SESSION_TIMEOUT):
            return await _session(target, mode)

    return anyio.run(bounded)
