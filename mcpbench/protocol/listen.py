"""A `subscriptions/listen` stream as a client holds it (2026-07-28, SEP-2575), free of I/O.

The client opens one long-lived request with the notification types it wants; the server
acknowledges on that request's response stream (`notifications/subscriptions/acknowledged`, with
the types it will honour) and then sends each change notification there, tagged in `_meta` with
`io.modelcontextprotocol/subscriptionId` (the listen request's id). The stream ends when the client
closes it (on Streamable HTTP closing the response stream is the cancellation; on stdio a
`notifications/cancelled`) or when the server ends it with the request's result; anything else
(the stream cut, never acknowledged) drops the subscription::

    listen = Listen(("toolsListChanged",))
    out = conn.send(conn.prepare(LISTEN, listen.params()), waiter=w, ts=now);  listen.opened(out.request_id, now)
    for each Pushed whose request_id is out.request_id:  event = listen.take(pushed.message, now)
        # Acknowledged | Change | None (not this stream's: counted in `foreign`)
    listen.answered(answer) / listen.broke(detail) / listen.unacknowledged(now)   # -> Ended
    listen.cancel_params()                     # stdio: the notifications/cancelled that closes it

The shell owns the clock and the bound on the acknowledgement's wait (`ACK_TIMEOUT` is the default).
"""

from dataclasses import dataclass, field
from typing import Any

from mcpbench.protocol.http import Failure
from mcpbench.protocol.jsonrpc import ErrorResponse, Notification, Response
from mcpbench.protocol.versions import LISTEN_ACKNOWLEDGED, META_SUBSCRIPTION_ID

# The change types a client may ask for (the spec's `SubscriptionFilter` flags), each with the
# notification it brings; `resourceSubscriptions` (a list of URIs) brings `notifications/resources/updated`.
LISTEN_TYPES = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
RESOURCE_SUBSCRIPTIONS = "resourceSubscriptions"
RESOURCE_UPDATED = "notifications/resources/updated"
# Seconds a client waits for the acknowledgement before it counts the stream as dropped.
ACK_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class Acknowledged:
    """The server took the subscription: `honored` is the filter it will serve (a subset of the one asked)."""

    honored: dict
    after: float  # seconds from the request


@dataclass(frozen=True, slots=True)
class Change:
    """A change notification of this stream; `asked` is False for a type the client did not ask for."""

    method: str
    params: Any
    asked: bool
    ts: float


@dataclass(frozen=True, slots=True)
class Ended:
    """The stream is over: `failure` None when the client closed it or the server ended it with its result."""

    failure: str | None
    detail: str
    changes: int


@dataclass(slots=True)
class Listen:
    """One listen stream: the filter asked, the acknowledgement, the changes counted."""

    types: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    request_id: Any = None
    opened_at: float | None = None
    acknowledged: Acknowledged | None = None
    changes: int = 0
    unasked: int = 0  # changes of a type not asked for (a server breaking the filter)
    foreign: int = 0  # notifications on the stream tagged for another subscription, or untagged
    ended: Ended | None = None
    counts: dict[str, int] = field(default_factory=dict)  # notification method -> how many came

    def __post_init__(self) -> None:
        unknown = [t for t in self.types if t not in LISTEN_TYPES]
        if unknown:
            raise ValueError(f"unknown listen type {unknown[0]!r} (known: {', '.join(LISTEN_TYPES)}, {RESOURCE_SUBSCRIPTIONS})")

    def params(self) -> dict:
        """The `subscriptions/listen` params: the types asked for (the envelope is the connection's)."""
        wanted: dict[str, Any] = {t: True for t in self.types}
        if self.resources:
            wanted[RESOURCE_SUBSCRIPTIONS] = list(self.resources)
        return {"notifications": wanted}

    def opened(self, request_id: Any, ts: float = 0.0) -> None:
        """The listen request left with this id (the subscription id its notifications carry)."""
        self.request_id, self.opened_at = request_id, ts

    def take(self, message: Notification, ts: float = 0.0) -> Acknowledged | Change | None:
        """A notification the listen request's stream carried."""
        if self.ended is not None:
            return None
        params = message.params if isinstance(message.params, dict) else {}
        meta = params.get("_meta")
        tag = meta.get(META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        if message.method == LISTEN_ACKNOWLEDGED and tag in (None, self.request_id):  # the SDK tags it too
            if self.acknowledged is None:
                honored = params.get("notifications")
                self.acknowledged = Acknowledged(honored if isinstance(honored, dict) else {}, ts - (self.opened_at or ts))
                return self.acknowledged
            return None
        if tag is None or tag != self.request_id:
            self.foreign += 1
            return None
        asked = self._asked(message.method)
        self.changes += 1
        self.unasked += not asked
        self.counts[message.method] = self.counts.get(message.method, 0) + 1
        return Change(message.method, message.params, asked, ts)

    def _asked(self, method: str) -> bool:
        if method == RESOURCE_UPDATED:
            return bool(self.resources)
        return any(LISTEN_TYPES[t] == method for t in self.types)

    # --- the end ---------------------------------------------------------------------------------------

    def closed(self) -> Ended:
        """The client closed the stream: the subscription ends as asked."""
        return self._end(None, f"closed by the client after {self.changes} changes")

    def answered(self, answer: Response | ErrorResponse) -> Ended:
        """The listen request got its answer: the server ended the stream (with an error: refused)."""
        if type(answer) is ErrorResponse:
            return self._end(Failure.LISTEN_DROPPED, f"subscriptions/listen refused: {answer.code}: {answer.message}")
        if self.acknowledged is None:
            return self._end(Failure.LISTEN_DROPPED, "the server ended the listen stream without acknowledging it")
        return self._end(None, f"ended by the server after {self.changes} changes")

    def broke(self, detail: str) -> Ended:
        """The stream broke (cut, the connection lost): the subscription is gone; a client listens again."""
        when = "before its acknowledgement" if self.acknowledged is None else f"after {self.changes} changes"
        return self._end(Failure.LISTEN_DROPPED, f"the listen stream broke {when}: {detail}")

    def unacknowledged(self, waited: float) -> Ended:
        """The acknowledgement did not come within the shell's bound."""
        return self._end(Failure.LISTEN_DROPPED, f"the listen stream was not acknowledged within {waited:g} s")

    def cancel_params(self, reason: str = "the client stopped listening") -> dict:
        """stdio: the `notifications/cancelled` params that close the stream (HTTP closes the response instead)."""
        return {"requestId": self.request_id, "reason": reason}

    def _end(self, failure: str | None, detail: str) -> Ended:
        if self.ended is None:
            self.ended = Ended(failure, detail, self.changes)
        return self.ended


def listen_filter(value: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A scenario's `listen:` (a list of types, `resourceSubscriptions` a mapping to URIs) -> (types, resources).

    Raises:
        ValueError: saying what is wrong.
    """
    items = value if isinstance(value, list) else [value]
    types: list[str] = []
    resources: list[str] = []
    for item in items:
        if isinstance(item, dict) and set(item) == {RESOURCE_SUBSCRIPTIONS}:
            uris = item[RESOURCE_SUBSCRIPTIONS]
            if not isinstance(uris, list) or not uris or not all(isinstance(u, str) and u for u in uris):
                raise ValueError(f"{RESOURCE_SUBSCRIPTIONS}: a list of resource URIs")
            resources += uris
        elif isinstance(item, str) and item in LISTEN_TYPES:
            if item not in types:
                types.append(item)
        else:
            raise ValueError(f"{item!r} is no listen type (known: {', '.join(LISTEN_TYPES)}, or {{{RESOURCE_SUBSCRIPTIONS}: [URI, …]}})")
    if not types and not resources:
        raise ValueError("name at least one type to listen for")
    return tuple(types), tuple(resources)


__all__ = ["ACK_TIMEOUT", "Acknowledged", "Change", "Ended", "LISTEN_TYPES", "Listen", "listen_filter"]
