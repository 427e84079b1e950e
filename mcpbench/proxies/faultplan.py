"""What faults to inject and when: option parsing, the schedule and the per-request decisions (no I/O).

The fault addon (`proxies/faults.py`), `mcpbench faults` and `lab up` read their options through
`parse_plan`, so a value means the same everywhere::

    plan = parse_plan(cut_streams_after="61s", drop="5%", drop_as="503", delay="20ms±10ms", faults_from="10s")
    decide = Decider(plan)
    decide.active(elapsed)            # inside the schedule's window?
    decide.drop(elapsed)              # drop this request? (seeded: the same answers for the same seed)
    decide.delay(elapsed)             # seconds to hold this request back

Times are seconds since the faults started (the proxy's start); the caller owns the clock.
"""

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from mcpbench.measures.durations import parse_duration
from mcpbench.protocol.errors import McpbenchError

# How a dropped request fails: its connection reset before it is forwarded, or an HTTP error answer.
DROP_AS: Final = ("reset", "502", "503")
# An added delay above this is no fault but a hang; it would also outlast every client's timeout.
MAX_DELAY: Final = 600.0

_DELAY = re.compile(r"^\s*([^±+]+?)\s*(?:(?:±|\+-|\+/-)\s*(.+?))?\s*$")
_SHARE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")


class FaultConfigError(McpbenchError):
    """A fault option that cannot be used; the message names the option and the value (exit 2)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultPlan:
    """The faults to inject. Durations in seconds; None means that fault is off."""

    cut_streams_after: float | None = None
    idle_timeout: float | None = None
    drop: float = 0.0  # share of requests, 0..1
    drop_as: str = "reset"
    delay: float = 0.0
    jitter: float = 0.0  # the delay is uniform in [delay - jitter, delay + jitter], never below 0
    faults_from: float = 0.0
    faults_until: float | None = None
    seed: int | None = None
    buffer_sse: bool = False  # hold every SSE stream back until it ends, as a buffering proxy does

    @property
    def any(self) -> bool:
        """Whether this plan injects anything at all."""
        return bool(self.cut_streams_after or self.idle_timeout or self.drop or self.delay or self.jitter or self.buffer_sse)


def parse_time(value: str, option: str, *, positive: bool = False) -> float:
    try:
        seconds = parse_duration(value, option)
    except ValueError as exc:
        raise FaultConfigError(str(exc)) from None
    if positive and seconds == 0:
        raise FaultConfigError(f"{option} {value!r} must be more than 0")
    return seconds


def parse_share(value: str, option: str = "--drop") -> float:
    """`5%` or `0.05` -> 0.05."""
    match = _SHARE.match(str(value))
    if not match:
        raise FaultConfigError(f"{option} {value!r} is not a share (like 5% or 0.05)")
    share = float(match.group(1)) / (100 if match.group(2) else 1)
    if share > 1:
        raise FaultConfigError(f"{option} {value!r} is more than 100%")
    return share


def parse_delay(value: str, option: str = "--delay") -> tuple[float, float]:
    """`20ms±10ms`, `20ms+-10ms` or `20ms` -> (0.02, 0.01) seconds (delay, jitter)."""
    match = _DELAY.match(str(value))
    if not match:
        raise FaultConfigError(f"{option} {value!r} is not a delay (like 20ms or 20ms±10ms)")
    delay = parse_time(match.group(1), option)
    jitter = parse_time(match.group(2), option) if match.group(2) else 0.0
    if delay + jitter > MAX_DELAY:
        raise FaultConfigError(f"{option} {value!r}: at most {MAX_DELAY:g} s")
    return delay, jitter


def parse_seed(value: str, option: str = "--seed") -> int | None:
    text = str(value).strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise FaultConfigError(f"{option} {value!r} is not an integer") from None


def parse_flag(value: str | bool, option: str) -> bool:
    """`true`/`false` (also yes/no, on/off, 1/0) or a bool -> bool."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0", ""):
        return False
    raise FaultConfigError(f"{option} {value!r} is not true or false")


def parse_plan(
    *,
    cut_streams_after: str | None = None,
    idle_timeout: str | None = None,
    drop: str | None = None,
    drop_as: str | None = None,
    delay: str | None = None,
    faults_from: str | None = None,
    faults_until: str | None = None,
    seed: str | None = None,
    buffer_sse: str | bool | None = None,
) -> FaultPlan:
    """A `FaultPlan` from option texts (None or empty: that option not given).

    Raises:
        FaultConfigError: a value that is not understood, naming the option.
    """
    given = lambda value: value is not None and str(value).strip() != ""  # noqa: E731
    kind = str(drop_as).strip() if given(drop_as) else "reset"
    if kind not in DROP_AS:
        raise FaultConfigError(f"--drop-as {drop_as!r}: one of {', '.join(DROP_AS)}")
    pause, jitter = parse_delay(delay) if given(delay) else (0.0, 0.0)
    start = parse_time(faults_from, "--faults-from") if given(faults_from) else 0.0
    end = parse_time(faults_until, "--faults-until") if given(faults_until) else None
    if end is not None and end <= start:
        raise FaultConfigError(f"--faults-until {faults_until!r} must come after --faults-from ({start:g} s)")
    return FaultPlan(
        cut_streams_after=parse_time(cut_streams_after, "--cut-streams-after", positive=True) if given(cut_streams_after) else None,
        idle_timeout=parse_time(idle_timeout, "--idle-timeout", positive=True) if given(idle_timeout) else None,
        drop=parse_share(drop) if given(drop) else 0.0,
        drop_as=kind,
        delay=pause,
        jitter=jitter,
        faults_from=start,
        faults_until=end,
        seed=parse_seed(seed) if given(seed) else None,
        buffer_sse=parse_flag(buffer_sse, "--buffer-sse") if given(buffer_sse) else False,
    )


# The addon's option names (`--set NAME=VALUE`) for each `parse_plan` argument.
ADDON_OPTIONS: Final = {
    "cut_streams_after": "mcpbench_faults_cut_streams_after",
    "idle_timeout": "mcpbench_faults_idle_timeout",
    "drop": "mcpbench_faults_drop",
    "drop_as": "mcpbench_faults_drop_as",
    "delay": "mcpbench_faults_delay",
    "faults_from": "mcpbench_faults_from",
    "faults_until": "mcpbench_faults_until",
    "seed": "mcpbench_faults_seed",
    "buffer_sse": "mcpbench_faults_buffer_sse",
}
LOG_OPTION: Final = "mcpbench_faults_log"


def addon_settings(texts: Mapping[str, str | None], log: str | None = None) -> list[str]:
    """`--set` arguments for mitmdump carrying the given `parse_plan` option texts (and the log)."""
    out: list[str] = []
    for name, value in texts.items():
        if value is not None and str(value).strip():
            out += ["--set", f"{ADDON_OPTIONS[name]}={value}"]
    if log:
        out += ["--set", f"{LOG_OPTION}={log}"]
    return out


class Decider:
    """Per-request decisions for a plan, from a seeded random source (no I/O, no clock)."""

    def __init__(self, plan: FaultPlan) -> None:
        self.plan = plan
        self._rng = random.Random(plan.seed)

    def active(self, elapsed: float) -> bool:
        """Whether faults are on `elapsed` seconds after the start."""
        plan = self.plan
        return elapsed >= plan.faults_from and (plan.faults_until is None or elapsed < plan.faults_until)

    def drop(self, elapsed: float) -> bool:
        """Whether to drop a request arriving at `elapsed` (one draw per request while active)."""
        if not self.plan.drop or not self.active(elapsed):
            return False
        return self._rng.random() < self.plan.drop

    def delay(self, elapsed: float) -> float:
        """Seconds to hold a request arriving at `elapsed` back (0 outside the schedule)."""
        plan = self.plan
        if not (plan.delay or plan.jitter) or not self.active(elapsed):
            return 0.0
        return max(0.0, plan.delay + self._rng.uniform(-plan.jitter, plan.jitter))

    def cut_due(self, opened: float, now: float) -> bool:
        """Whether a stream opened at `opened` is to be cut at `now` (its time is up, faults on)."""
        after = self.plan.cut_streams_after
        return after is not None and now - opened >= after and self.active(now)

    def idle_due(self, last_activity: float, now: float) -> bool:
        """Whether a connection quiet since `last_activity` is to be cut at `now`."""
        limit = self.plan.idle_timeout
        return limit is not None and now - last_activity >= limit and self.active(now)
