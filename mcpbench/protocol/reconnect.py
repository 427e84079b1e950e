"""Reconnect policies, free of I/O: what a client does when its session or stream breaks.

Written once for every transport; the load users' client (`load/client.py`) asks
`recovery.plan_recovery` what to do under its policy, and does it, keeping count
in `Recovery`:

- `none`: nothing; every later call fails until the run ends.
- `reinitialize`: a new session (stdio: a new process; legacy SSE: a new stream;
  Streamable HTTP: a new handshake), then go on.
- `resume`: where the cut stream had event ids (Streamable HTTP), reopen it with
  `Last-Event-ID` and read the answer from the replay; otherwise, or when the
  server no longer knows the session, reinitialize.

2026-07-28 has no session to start again and no stream to resume ("Resumable SSE
streams via `Last-Event-ID` are not supported"; a closed response stream cancels
its request): under `reinitialize` and `resume` alike, a request whose answer
stream broke is reissued with a new JSON-RPC id (`REISSUE`), on a new process or
stream first where the old one went with the break (stdio, legacy SSE). An input
round's retry goes again with the `requestState` it carried; a task's poll is
simply polled again. A reissue that finds no server yet (a restart) goes again as a
failed re-handshake does (`Reissues`). `none` reissues nothing, as in the handshake era.

Attempts back off exponentially with full jitter (a delay drawn from
[0, min(cap, base·2^attempt)]) on top of the cut stream's `retry:` (`Recovery.wait`), at most `attempts` per break, and every extra
request (handshakes, resume streams, re-sent calls) comes out of a retry budget,
a token bucket as in Finagle's `RetryBudget`: each ordinary request deposits
`budget` tokens (20 %: at most one extra request per five), time deposits
`budget_per_s` tokens a second (so a client with no session left to send on can
still try now and then), the bucket holds at most `budget_floor` tokens (the
burst a first break may spend), and an extra request takes one. Recovery cannot
turn into a retry storm: extra requests stay under `budget_floor + budget ×
requests + budget_per_s × seconds`. A call whose outcome is unknown (its
stream died after it was sent) is re-sent only when its tool is idempotent;
otherwise it is counted as uncertain. A call the server refused outright
(session not found, connection refused) did not run and may be re-sent.
"""

import random
import re
from dataclasses import dataclass, field

from mcpbench.protocol.http import Failure

NONE, REINITIALIZE, RESUME = "none", "reinitialize", "resume"
MODES = (NONE, REINITIALIZE, RESUME)  # what a scenario's `reconnect:` may say
# The policies of the other clients (`protocol/recovery.py`), never a scenario's.
REPORT = "report"  # replay: nothing is recovered (and, as an action: the failure is the outcome)
REOPEN = "reopen"  # forward: a new upstream session, the request again when it did not run
RETRY = "retry"  # the session still stands (a dropped request): only the call is re-sent
REISSUE = "reissue"  # 2026-07-28: the request again with a new id (its stream broke; there is no session to restore)

# Failure classes after which a session (or the stream it lived on) cannot be trusted.
BREAKS = frozenset({Failure.SESSION_NOT_FOUND, Failure.STREAM_CLOSED, Failure.CONNECT})
# Failure classes whose request did not run on the server: safe to send again, whatever the tool.
NOT_RUN = frozenset({Failure.SESSION_NOT_FOUND, Failure.CONNECT})
# HTTP statuses that say the request was not handled (RFC 9110 503, RFC 6585 429): safe to send again.
NOT_HANDLED = frozenset({429, 503})
# Failure classes of a request the server (or a proxy) dropped without a word; its session may still stand.
DROPPED = frozenset({Failure.HTTP_5XX})
# Failure classes of a request that found no server to answer it (its connection refused, a gateway's
# 5xx while the instance behind it is down): a server not reachable yet, as during a restart.
UNREACHED = frozenset({Failure.CONNECT, Failure.HTTP_5XX})

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*$")


def _seconds(text: str, what: str) -> float:
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"{what}: expected a duration like 50ms or 2s, got {text!r}")
    value = float(match[1])
    return value / 1000.0 if match[2] == "ms" else value


def _share(text: str, what: str) -> float:
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"{what}: expected a share like 20% or 0.2, got {text!r}") from None
    if not 0.0 <= value <= 10.0:
        raise ValueError(f"{what}: {text!r} is out of range")
    return value


@dataclass(frozen=True, slots=True)
class ReconnectPolicy:
    """How a client recovers. `idempotent` names the tools whose calls may be re-sent when their outcome is unknown."""

    mode: str = REINITIALIZE
    attempts: int = 5
    backoff: float = 0.05  # seconds: the first attempt's cap
    max_backoff: float = 2.0
    budget: float = 0.2  # tokens each ordinary request deposits: extra requests as a share of all
    budget_floor: int = 10  # tokens the bucket holds (and starts with): the burst a break may spend
    budget_per_s: float = 1.0  # tokens time deposits: a client with nothing to send still retries slowly
    idempotent: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.mode not in (*MODES, REPORT, REOPEN):
            raise _unknown(self.mode)
        if self.attempts < 1 or self.backoff < 0 or self.max_backoff < self.backoff or self.budget_floor < 0 or self.budget_per_s < 0:
            raise ValueError("reconnect: attempts >= 1, 0 <= backoff <= max_backoff, budgets >= 0")

    @classmethod
    def parse(cls, text: str) -> "ReconnectPolicy":
        """`resume` or `reinitialize,attempts=3,backoff=50ms,max_backoff=2s,budget=10%,idempotent=echo+add`."""
        mode, *options = [part.strip() for part in str(text).split(",")]
        return cls.from_mapping({"policy": mode, **dict(_option(o) for o in options if o)})

    @classmethod
    def from_mapping(cls, obj: dict) -> "ReconnectPolicy":
        """From a scenario's `reconnect:` mapping (policy, attempts, backoff, max_backoff, budget, budget_floor,
        budget_per_s, idempotent)."""
        known = {"policy", "attempts", "backoff", "max_backoff", "budget", "budget_floor", "budget_per_s", "idempotent"}
        unknown = sorted(set(obj) - known)
        if unknown:
            raise ValueError(f"reconnect: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
        if str(obj.get("policy", REINITIALIZE)) not in MODES:
            raise _unknown(obj["policy"])
        idempotent = obj.get("idempotent") or ()
        if isinstance(idempotent, str):
            idempotent = [t for t in re.split(r"[+ ]", idempotent) if t]
        try:
            attempts = int(obj.get("attempts", 5))
            floor = int(obj.get("budget_floor", 10))
            per_s = float(obj.get("budget_per_s", 1.0))
        except (TypeError, ValueError):
            raise ValueError("reconnect: attempts and budget_floor are whole numbers, budget_per_s a number") from None
        return cls(
            mode=str(obj.get("policy", REINITIALIZE)),
            attempts=attempts,
            backoff=_seconds(obj.get("backoff", "50ms"), "reconnect backoff"),
            max_backoff=_seconds(obj.get("max_backoff", "2s"), "reconnect max_backoff"),
            budget=_share(obj.get("budget", "20%"), "reconnect budget"),
            budget_floor=floor,
            budget_per_s=per_s,
            idempotent=frozenset(str(t) for t in idempotent),
        )

    def to_json(self) -> dict:
        return {"policy": self.mode, "attempts": self.attempts, "backoff": f"{self.backoff * 1000:g}ms",
                "max_backoff": f"{self.max_backoff:g}s", "budget": self.budget, "budget_floor": self.budget_floor,
                "budget_per_s": self.budget_per_s, "idempotent": sorted(self.idempotent)}


def _unknown(mode: object) -> ValueError:
    return ValueError(f"unknown reconnect policy {mode!r} (expected {', '.join(MODES)})")


def _option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"reconnect: expected key=value, got {text!r}")
    return key.strip(), value.strip()


class Recovery:
    """One client's reconnect bookkeeping: the requests it sent, the extra ones, the budget, the backoff draws.

    No clock and no sleeping: callers pass the time (`now`, seconds on any monotonic clock) and
    `delay()` says how long to wait; the shell waits.
    """

    def __init__(self, policy: ReconnectPolicy, rng: random.Random | None = None) -> None:
        self.policy = policy
        self.rng = rng or random.Random()
        self.requests = 0  # every request sent, extra ones included
        self.extra = 0  # requests sent only to recover
        self.denied = 0  # extra requests the budget refused
        self.tokens = float(policy.budget_floor)
        self._last: float | None = None

    def count(self, n: int = 1, *, extra: bool = False) -> None:
        """`n` requests were sent: an ordinary one deposits into the budget, an extra one takes from it."""
        self.requests += n
        if extra:
            self.extra += n
            self.tokens -= n
        else:
            self.tokens = min(self.policy.budget_floor, self.tokens + self.policy.budget * n)

    def allows(self, n: int = 1, now: float | None = None) -> bool:
        """Whether `n` more extra requests fit the budget at time `now` (counted as denied when not)."""
        if now is not None:
            if self._last is not None and now > self._last:
                self.tokens = min(self.policy.budget_floor, self.tokens + self.policy.budget_per_s * (now - self._last))
            self._last = now
        if self.tokens >= n:
            return True
        self.denied += n
        return False

    def delay(self, attempt: int) -> float:
        """Full jitter: a uniform draw from [0, min(max_backoff, backoff * 2**attempt)]."""
        return self.rng.uniform(0.0, min(self.policy.max_backoff, self.policy.backoff * (2 ** attempt)))

    def wait(self, attempt: int, retry_ms: int | None = None) -> float:
        """Seconds to wait before reopening what broke: at least the stream's last `retry:` (WHATWG
        HTML, "reconnection time"; MCP 2025-11-25: the client MUST respect it), the backoff's draw on top."""
        return (retry_ms or 0) / 1000.0 + self.delay(attempt)


class Reissues:
    """One break's reissues in 2026-07-28: the backoff step before each send, and when to stop. No I/O, no clock.

    As patient as the handshake era's recovery under the same policy. There each of `attempts` new
    sessions begins with a handshake that goes again up to `attempts` times while it finds no server
    (the load client's `_reinitialize` and `_redo_handshake`); here each of `attempts` reissues goes
    again up to `attempts` times while it finds no server (`UNREACHED`: refused, a gateway's 5xx), so a
    restart gets as many sends. A reissue that reached a server and broke again (its stream cut) is
    the next attempt: a proxy that cuts every stream still loses the call within `attempts` reissues.
    The backoff grows with every send of the break (capped at `max_backoff`) where a new handshake's
    starts over: a server not up yet is not helped by faster tries, and the budget, one token a send
    as for each handshake (the shell asks `Recovery.allows`), lasts the longer.
    """

    def __init__(self, attempts: int) -> None:
        self.attempts = attempts
        self.attempt = 1  # the reissue under way (1-based): the break record's `attempts`
        self.unreached = 0  # its sends after the first that found no server
        self.step: int | None = 0  # the backoff step (`Recovery.wait`'s attempt) before the next send; None: stop

    def failed(self, failure: str | None) -> None:
        """The last send failed with `failure` (and `plan_recovery` says a reissue may go again)."""
        sent = self.step + 1 if self.step is not None else 0
        if failure in UNREACHED and self.unreached < self.attempts:
            self.unreached += 1
        elif self.attempt < self.attempts:
            self.attempt += 1
            self.unreached = 0
        else:
            sent = None
        self.step = sent


__all__ = ["BREAKS", "MODES", "NONE", "REINITIALIZE", "REISSUE", "REOPEN", "REPORT", "RESUME", "RETRY", "ReconnectPolicy", "Recovery", "Reissues",
           "UNREACHED"]
