"""The reference server with one change: what a replay against a new build should catch.

Run: python -m mcpbench.lab.peers.variant_server MODE (stdio). The main job replays a recording against it;
the replay tests use every mode.

Modes: `echo-text` (echo answers with a suffix), `no-fail` (tool `fail` removed), `slow-add` (`add` takes
ADD_DELAY seconds longer), `ask-key` (2026-07-28: `ask` files its input request under ASK_NEW_KEY, a key no
recording of the reference server answered), `work-fails` (with the task tool `work`, every task ends failed).
"""

import sys
import time
from typing import Final

from mcpbench.lab.peers.reference_server import build_server
from mcpbench.system.processes import settled

ECHO_SUFFIX: Final = " (v2)"
# Far above the latency slack (250 ms) and 3x any loopback call, well under a test's budget.
ADD_DELAY: Final = 1.0
# The key `ask` asks under in `ask-key`.
ASK_NEW_KEY: Final = "confirm"


def _replace_fn(server, name, fn) -> None:
    """Swap a tool's function in place, so tools/list (order, schema) stays exactly as recorded.

    Uses the SDK's private tool manager: the public remove/add would move the tool to the end.
    """
    server._tool_manager.get_tool(name).fn = fn


def main(mode: str) -> None:
    if mode == "work-fails":
        from mcpbench.lab.peers.tasks import Tasks

        server = build_server(tasks=Tasks(failing=True))
        settled()
        server.run(transport="stdio")
        return
    server = build_server()
    if mode == "echo-text":
        _replace_fn(server, "echo", lambda text: text + ECHO_SUFFIX)

    elif mode == "no-fail":
        server.remove_tool("fail")
    elif mode == "slow-add":
        def add(a: int, b: int) -> int:
            time.sleep(ADD_DELAY)
            return a + b

        _replace_fn(server, "add", add)

    elif mode == "ask-key":
        from mcpbench.lab.peers import reference_server

        reference_server.ASK_INPUT_KEY = ASK_NEW_KEY  # read by `ask` at each call
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    settled()
    server.run(transport="stdio")


if __name__ == "__main__":
    main(sys.argv[1])
