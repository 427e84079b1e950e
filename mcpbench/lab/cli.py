"""`mcpbench lab`: run lab peers. `mcp` is imported inside the commands, so the CLI stays fast."""

import click

from mcpbench.cliutil import exit_on_signal, map_errors

# Mirrors mcpbench.lab.reference_server.TRANSPORTS, which cannot be imported here without `mcp`.
TRANSPORTS = ("stdio", "sse", "streamable-http")
# The path each HTTP transport serves, for the startup line.
ENDPOINT_PATHS = {"sse": "/sse", "streamable-http": "/mcp"}


@click.group()
def lab() -> None:
    """Lab peers for recording, replay and load tests."""


@lab.command()
@click.option("--transport", type=click.Choice(TRANSPORTS), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address (HTTP transports).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="Port (HTTP transports).")
@click.option("--json-response", is_flag=True, help="Streamable HTTP: answer with JSON bodies instead of SSE.")
@click.option("--stateless", is_flag=True, help="Streamable HTTP: no sessions (stateless_http).")
@map_errors
def serve(transport: str, host: str, port: int, json_response: bool, stateless: bool) -> None:
    """Run the reference MCP server (official Python SDK) until interrupted.

    Tools echo, add, slow, fail, big and ask; resource mcpbench://greeting; prompt summarize.

    Example: mcpbench lab serve --transport streamable-http --port 8101
    """
    if transport != "streamable-http" and (json_response or stateless):
        raise click.UsageError("--json-response and --stateless apply to --transport streamable-http only")
    from mcpbench.lab.reference_server import serve as run_server
    from mcpbench.listen import check_listen

    if transport == "stdio":
        exit_on_signal()  # nothing to save: the SDK's event loop would print the interrupt's traceback
    if transport in ENDPOINT_PATHS:
        check_listen(host, port)  # before the banner: a busy port is one line, exit 3
        # stdout stays clean (stdio speaks JSON-RPC there); this line tells a human where to point.
        url_host = f"[{host}]" if ":" in host else host
        click.echo(
            f"mcpbench: reference server ({transport}) on http://{url_host}:{port}{ENDPOINT_PATHS[transport]}",
            err=True,
        )
    try:
        run_server(transport, host=host, port=port, json_response=json_response, stateless=stateless)
    except KeyboardInterrupt:
        pass  # Ctrl-C is the normal way to stop it
