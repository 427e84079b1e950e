"""An official SDK 2.x server whose input round carries a `requestState`, sealed by the SDK (stdio).

The lab's `ask` sends no state; this one does, as a real deployment would: tool `confirm(item)`
asks for a form elicitation with `request_state` naming the item, and the SDK's
`RequestStateBoundary` seals it (AES-GCM under a key of this process) on the way out and opens it
on the retry. `python tests/support/sealing_server.py` serves it on stdio.
"""

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def build() -> MCPServer:
    server = MCPServer("sealing", log_level="WARNING")

    @server.tool()
    async def confirm(item: str, ctx: Context) -> str | InputRequiredResult:
        """Ask the user to confirm `item`; the state the retry brings back says what was asked."""
        answer = (ctx.input_responses or {}).get("confirm")
        if answer is None:
            form = ElicitRequestFormParams(message=f"confirm {item}?", requested_schema=SCHEMA)
            return InputRequiredResult(input_requests={"confirm": ElicitRequest(params=form)}, request_state=f"asked:{item}")
        said = answer.action if isinstance(answer, ElicitResult) else type(answer).__name__
        return f"{ctx.request_state}: {said}"

    return server


if __name__ == "__main__":
    build().run("stdio")
