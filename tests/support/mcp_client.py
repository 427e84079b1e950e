"""The official SDK client as the tests drive it: mcpbench.lab.peers.drive's session, and a sampling callback."""

from typing import Any, Final

from mcpbench.lab.peers.drive import drive as run_session  # noqa: F401 (re-exported for tests)

SAMPLED_PREFIX: Final = "sampled: "


async def sample(_ctx: Any, params: Any) -> Any:
    """A sampling callback standing in for an LLM: echoes the question with SAMPLED_PREFIX."""
    import mcp_types as types

    question = params.messages[0].content
    assert isinstance(question, types.TextContent)
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=SAMPLED_PREFIX + question.text), model="test"
    )
