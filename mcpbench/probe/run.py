"""Which checks run, each within its time bound, and what the probe found: `ProbeRun` (its rows, its JSON, its exit status)."""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mcpbench.probe.checks import (
    auth,
    buffering,
    cancel,
    churn,
    discover,
    headers,
    idle,
    listen,
    origin,
    results,
    resume,
    sessions,
    state,
    tasks,
    unknown,
    versions,
)
from mcpbench.probe.target import ProbeSettings, ProbeTarget, parse_url, reach
from mcpbench.probe.verdicts import CheckRow, exit_status, not_applicable
from mcpbench.probe.wire import ProbeOptions, Wire
from mcpbench.protocol.errors import McpbenchError

# First contact (is it there, is it MCP, does it want credentials): one handshake and tools/list.
FIRST_CONTACT = 10.0
# The default probe (every check but the opt-in idle one) ends within this, first contact included:
# each check gets its own bound, and no more than what is left of this.
TOTAL = 115.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    title: str
    run: Callable[[ProbeTarget, float], CheckRow]
    bound: Callable[[ProbeTarget], float]
    opt_in: bool = False


def _fixed(seconds: float) -> Callable[[ProbeTarget], float]:
    return lambda target: seconds


CHECKS: tuple[Check, ...] = tuple(
    Check(m.NAME, m.TITLE, m.run, _fixed(m.BOUND)) for m in (versions, sessions, unknown, resume, buffering)
) + (Check(idle.NAME, idle.TITLE, idle.run, idle.bound, opt_in=True),) + tuple(
    Check(m.NAME, m.TITLE, m.run, _fixed(m.BOUND)) for m in (churn, origin, auth)
) + tuple(  # 2026-07-28's endpoints (n/a in a moment where the server does not speak it)
    Check(m.NAME, m.TITLE, m.run, _fixed(m.BOUND)) for m in (discover, headers, results, listen, cancel, state, tasks)
)
NAMES = tuple(check.name for check in CHECKS)


class UnknownCheck(McpbenchError):
    """A check name that does not exist (exit 2)."""


def select(only: Sequence[str] = (), skip: Sequence[str] = (), *, idle_asked: bool = False) -> list[Check]:
    """The checks to run, in their order: `only` these (else all but the opt-in ones, and idle when
    asked for), without `skip`. Names may come comma-separated.

    Raises:
        UnknownCheck: a name that is no check (names the known ones).
    """
    wanted, dropped = _names(only, "--only"), _names(skip, "--skip")
    chosen = [c for c in CHECKS if (c.name in wanted if wanted else (not c.opt_in or idle_asked)) and c.name not in dropped]
    if not chosen:
        raise UnknownCheck("no check left to run (--only and --skip leave none)")
    return chosen


def _names(given: Sequence[str], option: str) -> set[str]:
    names = {name.strip() for text in given for name in text.split(",") if name.strip()}
    unknown = sorted(names - set(NAMES))
    if unknown:
        raise UnknownCheck(f"{option} {unknown[0]!r}: no such check (checks: {', '.join(NAMES)})")
    return names


@dataclass
class ProbeRun:
    """What one probe found: the endpoint as first contact saw it, and one row per check."""

    url: str
    target: ProbeTarget
    rows: list[CheckRow] = field(default_factory=list)
    started: float = 0.0  # wall clock
    seconds: float = 0.0

    @property
    def needs_credentials(self) -> bool:
        return self.target.auth_status is not None

    def exit_code(self, *, strict: bool = False, credentials_given: bool = False) -> int:
        """The probe's verdict: 1 when a check failed (or, `strict`, warned), else 0.

        Raises:
            McpbenchError: the server wants credentials (other ones, when some were given): only its
                authentication shape was checked (exit 2).
        """
        if self.needs_credentials:
            ask = "other credentials" if credentials_given else "credentials"
            raise McpbenchError(f"{self.url} answers HTTP {self.target.auth_status}: give {ask} to probe it "
                                "(only its authentication shape was checked)")
        return exit_status(self.rows, strict=strict)

    def to_json(self) -> dict:
        target = self.target
        return {
            "probe": self.url, "transport": target.transport, "started": round(self.started, 3), "seconds": round(self.seconds, 3),
            "version": target.version, "server": target.server, "keeps_sessions": target.keeps_sessions,
            "streams": target.streams, "progress_tool": target.progress.tool if target.progress else None,
            "auth_status": target.auth_status, "checks": [row.to_json() for row in self.rows],
        }


def probe(
    url: str,
    checks: Sequence[Check],
    *,
    options: ProbeOptions | None = None,
    settings: ProbeSettings | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> ProbeRun:
    """Run `checks` against `url`, each within its bound; `say` hears one line per check as it ends.

    Raises:
        TargetError: the endpoint cannot be reached, does not answer, or is not MCP (exit 3).
        BadTargetError: `url` is not an HTTP URL (exit 2).
    """
    options, settings = options or ProbeOptions(), settings or ProbeSettings()
    _, http_url = parse_url(url)
    start, started = time.monotonic(), time.time()
    target = reach(url, Wire(http_url, options), settings, deadline=start + FIRST_CONTACT)
    run = ProbeRun(url, target, started=started)
    ends = start + TOTAL + (idle.bound(target) if any(c.opt_in for c in checks) else 0.0)
    for check in checks:
        began = time.monotonic()
        if target.auth_status is not None and check.name != auth.NAME:
            row = not_applicable(check.name, f"the server wants credentials (HTTP {target.auth_status}): give them to probe this")
        elif began >= ends:
            row = not_applicable(check.name, f"not run: the probe's {TOTAL:g} s were used up")
        else:
            row = check.run(target, min(began + check.bound(target), ends))
        row.title, row.seconds = check.title, time.monotonic() - began
        run.rows.append(row)
        say(f"mcpbench: probe: {check.name}: {row.verdict} ({row.seconds:.1f} s)")
    run.seconds = time.monotonic() - start
    return run


__all__ = ["CHECKS", "NAMES", "Check", "ProbeRun", "UnknownCheck", "probe", "select"]
