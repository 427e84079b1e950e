"""What the tests of whole operations share (tests/lab/peers/test_tasks_recorded.py, tests/replay/
test_mock_operations.py, test_replay_operations.py): the official SDK 2.x client's drives of the
reference server, and one stdio recording of them all, made once per test process (the replay
modules read it; neither changes it).

Each drive is given a maker of targets (a legacy SSE target serves one session) and returns what
the client saw: `ask` in 2026-07-28 (an input round answered by the elicitation callback, then the
retry), `work` as a task in both forms (polled to its end; a second task cancelled), a 2026-07-28
task of `work` that asks for input mid-task (answered with `tasks/update`), and a listen stream told
of two `toggle_tool` changes (the second puts the tool list back as it was).
"""

import functools
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from tests.support.recordings import tee_argv
from tests.support.servers import serve_argv, stdio_params

# A whole SDK session's budget inside an event loop: far above a loopback session.
TIMEOUT = 60.0
# The SDK client's modes and the version each speaks.
MODES = {"legacy": "2025-11-25", "auto": "2026-07-28"}
WORK_MS = 150


async def drive_tasks(target, mode: str) -> list[dict]:
    """`work` as a task in `mode`'s form, polled to its end, then a second task cancelled: what the client saw."""
    from mcp import Client

    from mcpbench.lab.peers.tasks import call_as_task, tasks_extension

    with anyio.fail_after(TIMEOUT):
        async with Client(target, mode=mode, extensions=[tasks_extension()]) as client:
            assert client.protocol_version == MODES[mode]
            return [await call_as_task(client, WORK_MS), await call_as_task(client, 30_000, cancel=True)]


async def accept(_ctx, _params) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": "yes"})


async def ask(targets) -> str:
    from mcp import Client

    with anyio.fail_after(TIMEOUT):
        async with Client(targets(), mode="auto", elicitation_callback=accept) as client:
            return (await client.call_tool("ask", {"question": "ready?"})).content[0].text


async def tasks(targets) -> dict[str, list[dict]]:
    """Each form's tasks as the client saw them (`lab.peers.tasks.call_as_task`)."""
    return {mode: await drive_tasks(targets(), mode) for mode in MODES}


async def task_input(targets) -> dict:
    """A 2026-07-28 task of `work` that asks for a confirmation mid-task, answered with `tasks/update`."""
    from mcp import Client

    from mcpbench.lab.peers.tasks import call_as_task, tasks_extension

    with anyio.fail_after(TIMEOUT):
        async with Client(targets(), mode="auto", extensions=[tasks_extension()]) as client:
            return await call_as_task(client, WORK_MS, ask=True)


async def listen_twice(targets) -> list[str]:
    """A listen stream, and two changes on it (the tool `extra` added, then removed)."""
    from mcp import Client

    heard = []
    with anyio.fail_after(TIMEOUT):
        async with Client(targets(), mode="auto") as client:
            async with client.listen(tools_list_changed=True) as subscription:
                for _ in range(2):
                    await client.call_tool("toggle_tool", {})
                    heard.append(type(await subscription.__anext__()).__name__)
    return heard


DRIVES = {"ask": ask, "tasks": tasks, "task_input": task_input, "listen": listen_twice}


@functools.cache
def stdio_recording(folder: Path) -> tuple[Path, dict[str, Any]]:
    """Every drive through the tee into one trace in `folder` (made once): the trace, and what each drive saw."""
    trace = folder / "operations-stdio.jsonl"
    seen = {what: anyio.run(drive, lambda: stdio_params(tee_argv(trace, serve_argv("stdio", extra_args=["--tasks"]))))
            for what, drive in DRIVES.items()}
    return trace, seen
