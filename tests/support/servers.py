"""Real peers for tests: the reference server processes of mcpbench.lab.peers.servers (started and stopped
by mcpbench.system.processes), plus SDK stdio parameters."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mcpbench.lab.peers.servers import (  # noqa: F401 (re-exported for tests)
    ENDPOINT_PATHS,
    HOST,
    REPO_ROOT,
    START_ATTEMPTS,
    RunningServer,
    reference_server,
    serve_argv,
)
from mcpbench.system.processes import (  # noqa: F401 (re-exported for tests)
    POLL_INTERVAL,
    STARTUP_TIMEOUT,
    STOP_TIMEOUT,
    ServerStartError,
    free_port,
    stop_process,
    wait_for_port,
)

if TYPE_CHECKING:  # `mcp` is slow to import; only stdio_params needs it, at call time
    from mcp import StdioServerParameters


def stdio_params(argv: Sequence[str], *, env: dict[str, str] | None = None) -> "StdioServerParameters":
    """SDK parameters that launch `argv` as a stdio server (pass them to `mcp.Client`).

    The SDK hands the child only a safe subset of the environment (HOME, PATH, ...) plus `env`.
    """
    from mcp import StdioServerParameters

    return StdioServerParameters(command=argv[0], args=list(argv[1:]), env=env, cwd=str(REPO_ROOT))
