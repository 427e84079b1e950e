"""The official Python SDK client as a second client under faults: what a host's client really does.

`run_sdk_client()` opens ONE `mcp.Client` session, as a host would, and calls tools in turn for a
while, each call bounded; it never re-initialises on the client's behalf, so whatever happens after
a cut stream or a restarted instance is the SDK's own doing. One JSON line per call (flushed):

    {"t": 1764770000.1, "client": "sdk", "step": "tools/call slow", "ok": false,
     "failure": "stream-closed", "detail": "SSE stream ended without a response", "latency_ms": 1012.4,
     "progress": 4, "progress_repeated": 0}

(`progress`: progress notifications the call got; `progress_repeated`: how many of them repeated
a value already seen, which a resumed stream can do.)

Failure classes are the ones the load users use (`protocol.http.Failure`) where the meaning is the
same, so both clients line up in one experiment; the SDK adds `client-closed` (every call after
the client died: its `async with` ended with an error, or its transport ended and the SDK answers
every call "Connection closed" at once) and `jsonrpc-error <code>` (any other JSON-RPC error).

The client is asyncio: it runs in its own process (`python -m mcpbench.lab.peers.sdk_client …`, see
`main`), never inside Locust's gevent workers. Exit 0 whatever the calls did (that is the
measurement), 2 for bad arguments, 3 when the target cannot be reached at the start. The SDK
logs what it does (reconnects, tracebacks of cut streams) on stderr: send it to a file.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

from mcpbench.cliutil import OneLineParser, exit_on_signal
from mcpbench.protocol.errors import BadTargetError, McpbenchError, TargetError
from mcpbench.protocol.http import Failure
from mcpbench.system.target import parse_target
from mcpbench.protocol.transports import STDIO, TRANSPORTS

CLIENT: Final = "sdk"
CLIENT_CLOSED: Final = "client-closed"
TIMEOUT: Final = Failure.ANSWER_LOST
# A call starts at most this often (also after one that failed at once, or once the client is
# dead): ten lines a second keeps the file small and the client light beside a load.
MIN_CALL_INTERVAL: Final = 0.1
MAX_DETAIL: Final = 120
# Session ids, event ids and other long hex or UUID tokens are left out of details.
_IDS: Final = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}|[0-9a-fA-F_]{16,}")
# JSON-RPC codes the SDK uses for its own transport failures (mcp.types: CONNECTION_CLOSED,
# INVALID_REQUEST with "Session terminated" for a 404 on a session).
_CONNECTION_CLOSED: Final = -32000
_INVALID_REQUEST: Final = -32600
_DISPATCHER_CLOSED: Final = "Connection closed"  # the SDK dispatcher's words once its transport ended


def _detail(text: str) -> str:
    text = _IDS.sub("…", " ".join(str(text).split()))
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, in order."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def classify(exc: BaseException) -> tuple[str, str]:
    """`(failure class, detail)` of what a call (or the dead session) raised."""
    from mcp.shared.exceptions import MCPError

    leaves = _leaves(exc)
    exc = next((leaf for leaf in leaves if not _is_cancel(leaf)), leaves[0])
    if isinstance(exc, TimeoutError):
        return TIMEOUT, "no answer within the call's timeout"
    if isinstance(exc, MCPError):
        code, message = exc.error.code, exc.error.message
        if code == _INVALID_REQUEST and "session" in message.lower():
            return Failure.SESSION_NOT_FOUND, _detail(message)
        if code == _CONNECTION_CLOSED:
            return Failure.STREAM_CLOSED, _detail(message)
        return f"jsonrpc-error {code}", _detail(message)
    import anyio
    import httpx2

    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)):
        return CLIENT_CLOSED, _detail(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    if isinstance(exc, httpx2.ConnectError):
        return Failure.CONNECT, _detail(str(exc) or type(exc).__name__)
    return type(exc).__name__, _detail(str(exc) or type(exc).__name__)


def _is_cancel(exc: BaseException) -> bool:
    import anyio

    return isinstance(exc, anyio.get_cancelled_exc_class())


def _is_dead(client: Any, exc: BaseException) -> bool:
    """Whether a call's error means the client itself is finished: its streams or its dispatcher closed.

    The SDK answers every call of a closed dispatcher (the transport ended: a legacy SSE stream cut,
    a stdio server gone) with JSON-RPC -32000 "Connection closed" at once; a cut Streamable HTTP
    answer stream uses the same code with other words and leaves the client usable.
    """
    import anyio
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)):
        return True
    if not (isinstance(exc, MCPError) and exc.error.code == _CONNECTION_CLOSED):
        return False
    closed = getattr(getattr(getattr(client, "_session", None), "_dispatcher", None), "_closed", None)
    return closed if isinstance(closed, bool) else exc.error.message == _DISPATCHER_CLOSED


class _Lines:
    """The per-call lines and the tally the run returns."""

    def __init__(self, out: Path) -> None:
        from mcpbench.proxies.faults import FaultLog  # JSON Lines, one write per line

        out.parent.mkdir(parents=True, exist_ok=True)
        self.log = FaultLog(out)
        self.calls = self.ok = 0
        self.failures: Counter[str] = Counter()
        self.first_failure_t: float | None = None
        self.last_ok_t: float | None = None
        self.progress_repeated = 0

    def write(self, t: float, step: str, latency: float, failure: str | None = None, detail: str = "", *,
              progress: Sequence[float] = ()) -> None:
        t = round(t, 6)  # the file's and the summary's times are the same numbers
        repeated = len(progress) - len(set(progress))  # a resumed stream may deliver one twice
        self.progress_repeated += repeated
        self.calls += 1
        if failure is None:
            self.ok += 1
            self.last_ok_t = t
        else:
            self.failures[failure] += 1
            if self.first_failure_t is None:
                self.first_failure_t = t
        self.log.write({"t": t, "client": CLIENT, "step": step, "ok": failure is None, "failure": failure,
                        "detail": detail, "latency_ms": round(latency * 1000, 3),
                        "progress": len(progress), "progress_repeated": repeated})

    def summary(self, survived: bool, death: str | None) -> dict[str, Any]:
        return {"calls": self.calls, "ok": self.ok, "failed": self.calls - self.ok, "survived": survived,
                "first_failure_t": self.first_failure_t, "last_ok_t": self.last_ok_t,
                "failures": dict(sorted(self.failures.items())), "death": death,
                "session_lost": self.failures[Failure.SESSION_NOT_FOUND] > 0,
                "progress_repeated": self.progress_repeated}


def sdk_server(target: str | Sequence[str], transport: str) -> Any:
    """What `mcp.Client` takes for `target` on `transport`."""
    if transport == STDIO:
        from mcp import StdioServerParameters

        argv = shlex.split(target) if isinstance(target, str) else list(target)
        if not argv:
            raise BadTargetError("stdio target: no command")
        return StdioServerParameters(command=argv[0], args=argv[1:])
    if not isinstance(target, str) or not target.startswith(("http://", "https://")):
        raise BadTargetError(f"{transport} target {target!r}: expected an http(s):// URL")
    from mcpbench.lab.peers.drive import sdk_target

    return sdk_target(target, transport)


def run_sdk_client(
    target: str | Sequence[str],
    transport: str,
    *,
    duration: float,
    calls: Sequence[tuple[str, dict]],
    out: Path,
    timeout: float,
    mode: str = "legacy",
    max_calls: int | None = None,
) -> dict[str, Any]:
    """Run one SDK client session for `duration` seconds, cycling through `calls`; one line per call to `out`.

    Args:
        target: a Streamable HTTP URL (`…/mcp`), a legacy SSE URL (`…/sse`) or a stdio argv.
        transport: "streamable-http", "sse" or "stdio".
        duration: seconds from the start (handshake included) after which no call starts.
        calls: `(tool, arguments)` pairs, called in turn.
        timeout: bound of the handshake and of each call (`anyio.fail_after`).
        mode: the SDK's `legacy` (handshake era: sessions the faults can break) or `auto`.
        max_calls: end after this many calls, if `duration` has not ended the run before (a run
            counted, not timed: on a busy machine it still makes its calls).

    Returns:
        `{"calls", "ok", "failed", "survived", "first_failure_t", "last_ok_t", "failures", "death",
        "session_lost", "progress_repeated"}`; `survived` is False when the client died (`death` says
        how); `session_lost` when the server said its session is gone (the SDK does not start another).

    Raises:
        BadTargetError: unusable arguments (exit 2).
        TargetError: the handshake failed: the target is unreachable or no MCP server (exit 3).
    """
    import anyio

    if transport not in TRANSPORTS:
        raise BadTargetError(f"unknown transport {transport!r} ({', '.join(TRANSPORTS)})")
    if not calls:
        raise BadTargetError("no calls to make")
    if duration < 0 or not timeout > 0:
        raise BadTargetError("duration must be >= 0 and timeout > 0")
    server = sdk_server(target, transport)
    name = target if isinstance(target, str) else shlex.join(target)
    return anyio.run(_run, server, name, duration, list(calls), Path(out), timeout, mode, max_calls)


async def _run(server: Any, name: str, duration: float, calls: list[tuple[str, dict]], out: Path, timeout: float,
               mode: str, max_calls: int | None) -> dict[str, Any]:
    import anyio
    from mcp import Client

    end = _Until(time.monotonic() + duration, max_calls)
    lines = _Lines(out)
    state: dict[str, Any] = {"in_flight": None, "connected": False, "done": False, "index": 0}
    death: str | None = None
    try:
        # One scope round the whole session, so that its task groups nest inside it: its deadline
        # bounds the handshake, is lifted for the calls (each has its own), and bounds the close.
        with anyio.CancelScope(deadline=anyio.current_time() + timeout) as scope:
            async with Client(server, mode=mode) as client:
                state["connected"] = True
                scope.deadline = math.inf
                death = await _calls(client, calls, end, timeout, lines, state)
                state["done"] = True
                scope.deadline = anyio.current_time() + timeout  # the close (a DELETE) is bounded too
        if not state["connected"]:
            raise TargetError(f"{name}: no handshake within {timeout:g} s")
    except McpbenchError:
        lines.log.close()
        raise
    except Exception as exc:  # noqa: BLE001 - the session died (or never began): that is the measurement
        failure, detail = classify(exc)
        if not state["connected"]:
            lines.log.close()
            raise TargetError(f"{name}: the SDK client could not connect: {detail}") from None
        if not isinstance(exc, BaseExceptionGroup):
            lines.log.close()
            raise  # not the client's task group failing: a bug here, not a measurement
        if death is None and not state["done"]:  # (a failure while closing after the run is no death)
            death = f"{failure}: {detail}"
            if state["in_flight"] is not None:
                t, began, step = state["in_flight"]
                lines.write(t, step, time.perf_counter() - began, failure, detail)
            # the `async with` is over: no client left to call through
            await _dead_calls(calls, end, lines, state["index"])
    lines.log.close()
    return lines.summary(death is None, death)


class _Until(NamedTuple):
    """When a run ends: at `deadline` (monotonic), or after `max_calls` calls."""

    deadline: float
    max_calls: int | None

    def more(self, made: int) -> bool:
        return time.monotonic() < self.deadline and (self.max_calls is None or made < self.max_calls)


async def _calls(client: Any, calls: list[tuple[str, dict]], end: _Until, timeout: float, lines: _Lines,
                 state: dict[str, Any]) -> str | None:
    """Call in turn until `end`; None, or why the client died under a call.

    Once the client's streams or dispatcher closed, calls go on (each still made through the SDK),
    and their failures are classed `client-closed`.
    """
    import anyio

    death: str | None = None
    while end.more(state["index"]):
        tool, arguments = calls[state["index"] % len(calls)]
        state["index"] += 1
        step = f"tools/call {tool}"
        t, began = time.time(), time.perf_counter()
        state["in_flight"] = (t, began, step)
        progress: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        try:
            with anyio.fail_after(timeout):
                result = await client.call_tool(tool, arguments, progress_callback=on_progress)
        except Exception as exc:  # noqa: BLE001 - every failure of a call is recorded and classified
            failure, detail = classify(exc)
            if death is not None:
                failure = CLIENT_CLOSED
            elif _is_dead(client, exc):
                death = f"{failure}: {detail}"
            lines.write(t, step, time.perf_counter() - began, failure, detail, progress=progress)
        else:
            if result.is_error:
                text = getattr(result.content[0], "text", "") if result.content else ""
                lines.write(t, step, time.perf_counter() - began, Failure.TOOL_ERROR, _detail(text), progress=progress)
            else:
                lines.write(t, step, time.perf_counter() - began, progress=progress)
        state["in_flight"] = None
        await anyio.sleep(max(0.0, began + MIN_CALL_INTERVAL - time.perf_counter()))
    return death


async def _dead_calls(calls: list[tuple[str, dict]], end: _Until, lines: _Lines, index: int) -> None:
    """What a host whose client's `async with` ended gets until `end`: every call fails at once."""
    import anyio

    while end.more(index):
        tool, _ = calls[index % len(calls)]
        index += 1
        lines.write(time.time(), f"tools/call {tool}", 0.0, CLIENT_CLOSED, "the client session is closed")
        await anyio.sleep(MIN_CALL_INTERVAL)


def _call(text: str) -> tuple[str, dict]:
    tool, sep, arguments = text.partition("=")
    if not tool:
        raise argparse.ArgumentTypeError(f"--call {text!r}: expected TOOL or TOOL=JSON")
    try:
        parsed = json.loads(arguments) if sep else {}
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--call {text!r}: arguments are not JSON ({exc.msg})") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"--call {text!r}: arguments must be a JSON object")
    return tool, parsed


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m mcpbench.lab.peers.sdk_client --target URL --transport T --duration S --out FILE --call TOOL=JSON …`."""
    parser = OneLineParser("sdk_client", prog="python -m mcpbench.lab.peers.sdk_client", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True,
                        help="URL, or a stdio command line; without --transport: stdio:CMD, http(s)://…/mcp or sse+http(s)://…/sse")
    parser.add_argument("--transport", choices=TRANSPORTS)
    parser.add_argument("--duration", type=_positive, required=True, help="seconds of calls")
    parser.add_argument("--timeout", type=_positive, default=30.0, help="bound of the handshake and of each call (s)")
    parser.add_argument("--out", type=Path, required=True, help="JSON Lines file, one line per call (appended)")
    parser.add_argument("--call", type=_call, action="append", required=True, metavar="TOOL=JSON",
                        help="a tool and its arguments; repeat: called in turn")
    parser.add_argument("--mode", choices=("legacy", "auto"), default="legacy")
    parser.add_argument("--max-calls", type=int, help="end after this many calls (--duration is then the bound)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad argument (2, said in one line)
        return exc.code if isinstance(exc.code, int) else 2
    exit_on_signal()  # every line is already written: nothing to save
    target: str | Sequence[str] = args.target
    transport = args.transport
    try:
        if transport is None:
            parsed = parse_target(args.target)
            transport, target = parsed.transport, parsed.url or list(parsed.argv)
        summary = run_sdk_client(target, transport, duration=args.duration, calls=args.call, out=args.out,
                                 timeout=args.timeout, mode=args.mode, max_calls=args.max_calls)
    except McpbenchError as exc:
        print(f"sdk_client: {exc}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
