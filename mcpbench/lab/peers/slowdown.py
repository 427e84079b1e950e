"""`lab serve --slow TOOL=20%`: one tool of the reference server made slower on purpose.

A share (`slow=20%`) adds that share of the tool's own run time after it runs: a tool that does
work (`slow`, `big`) becomes that much slower inside the server. A duration (`echo=+5ms`) adds a
fixed delay, for a tool whose own run time is next to nothing. The tool stays what it was: an
async tool sleeps on the event loop, a plain one in the worker thread the SDK runs it in.

No `mcp` import here: `lab serve` parses the option before it loads the SDK.
"""

import functools
import inspect
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The reference server's tools (reference_server.py registers these).
TOOLS = ("echo", "add", "slow", "fail", "big", "ask", "toggle_tool")
# A delay beyond this would hold calls past a load test's timeouts: an hour of misconfiguration.
MAX_DELAY_SECONDS = 10.0

_SPEC = re.compile(r"^(?P<tool>[A-Za-z0-9_-]+)=\+?(?P<value>\d+(?:\.\d*)?|\.\d+)(?P<unit>%|ms|s)$")


@dataclass(frozen=True, slots=True)
class Slowdown:
    """`tool` made slower by `share` of its run time, plus `seconds`."""

    tool: str
    share: float = 0.0
    seconds: float = 0.0

    def extra(self, took: float) -> float:
        return min(MAX_DELAY_SECONDS, self.share * took + self.seconds)


def parse_slowdown(text: str) -> Slowdown:
    """`TOOL=20%` or `TOOL=+5ms` (also `s`).

    Raises:
        ValueError: it does not parse, or names no tool of the reference server (says which and why).
    """
    match = _SPEC.match(text.strip())
    if match is None:
        raise ValueError(f"--slow {text!r}: expected TOOL=SHARE% or TOOL=+DURATION (e.g. slow=20% or echo=+5ms)")
    tool, value, unit = match["tool"], float(match["value"]), match["unit"]
    if tool not in TOOLS:
        raise ValueError(f"--slow {text!r}: no tool {tool!r}; the reference server has {', '.join(TOOLS)}")
    if unit == "%":
        return Slowdown(tool, share=value / 100.0)
    seconds = value / 1000.0 if unit == "ms" else value
    if seconds > MAX_DELAY_SECONDS:
        raise ValueError(f"--slow {text!r}: at most {MAX_DELAY_SECONDS:g} s")
    return Slowdown(tool, seconds=seconds)


def slowed(fn: Callable[..., Any], slowdown: Slowdown | None) -> Callable[..., Any]:
    """`fn` (a tool function) made slower as `slowdown` says; `fn` itself without one.

    The wrapper keeps `fn`'s signature (the SDK reads the tool's parameters from it) and whether it
    is a coroutine function (the SDK runs a plain function in a worker thread).
    """
    if slowdown is None:
        return fn
    if inspect.iscoroutinefunction(fn):
        import anyio

        @functools.wraps(fn)
        async def slowed_async(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                await anyio.sleep(slowdown.extra(time.perf_counter() - start))

        return slowed_async

    @functools.wraps(fn)
    def slowed_sync(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            time.sleep(slowdown.extra(time.perf_counter() - start))

    return slowed_sync
