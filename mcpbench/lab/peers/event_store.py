"""Resumption for the reference server: an in-memory `EventStore` (the official SDK's interface).

With a store, the SDK gives every SSE event of Streamable HTTP an `id:` (and, from 2025-11-25, a
priming event first), and a `GET` carrying `Last-Event-ID` replays what the stream missed. The SDK
ships no store; this one keeps the last `MAX_EVENTS_PER_STREAM` events of each stream.

The SDK names a stream by the JSON-RPC id of the request it answers (or `_GET_stream`) and gives
one store to every session, so two sessions' streams share names ("1", "_GET_stream"). Events are
therefore filed under (session scope, stream): `SessionScopes`, an ASGI middleware, sets a context
variable per request to the scope of its `Mcp-Session-Id` (a new scope for a request that opens a
session, remembered once the answer names the session). The session's own tasks are started
while its opening request runs, so they inherit that scope; event ids are unique in the process.

A `Last-Event-ID` resumes only a stream of the session that asks: an id of another session's
event replays nothing (event replay across sessions leaks one client's answers to another, a
known flaw of stores keyed by event id alone). `leaky=True` keeps that flaw on purpose, for
`mcpbench probe` to be shown catching it (`lab serve --resumable --leaky-events`).

A replay sends what the stream holds after the id, and what comes while it sends too (each send
waits for the client), so that the SDK's window between the replay and the stream going live (its
`_replay_events`: what the request sends there is stored but sent on no stream) is one await, not
the whole replay. `replay_pause` widens that window on purpose (`lab serve --replay-pause`): a client
must resume such a stream from its last message, not from the priming event minted after it.
"""

import contextvars
import itertools

import anyio
from collections import OrderedDict, deque
from typing import Final

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId

# Events kept per stream, oldest dropped first: a client reconnecting within seconds misses a
# handful; 1,000 holds a whole call of `slow` at its most steps (MAX_SLOW_STEPS progress events).
MAX_EVENTS_PER_STREAM: Final = 1000
# Streams kept in all, least recently written dropped first: bounds memory under load runs that
# open many sessions and never end them (1,000 events of a few hundred bytes each, at worst).
MAX_STREAMS: Final = 2000
# Sessions whose scope is remembered, least recently used dropped first (as the streams).
MAX_SESSIONS: Final = 10_000
SESSION_HEADER: Final = b"mcp-session-id"

_scope: contextvars.ContextVar[int] = contextvars.ContextVar("mcpbench_event_scope", default=0)


class MemoryEventStore(EventStore):
    """The last events of each stream, in memory, bounded (see the constants)."""

    def __init__(self, max_events: int = MAX_EVENTS_PER_STREAM, max_streams: int = MAX_STREAMS, *, leaky: bool = False,
                 replay_pause: float = 0.0) -> None:
        self.replay_pause = replay_pause
        self.max_events = max_events
        self.max_streams = max_streams
        self.leaky = leaky
        self._ids = itertools.count(1)
        self._streams: OrderedDict[tuple[int, StreamId], deque[tuple[EventId, object]]] = OrderedDict()
        self._where: dict[EventId, tuple[int, StreamId]] = {}

    async def store_event(self, stream_id: StreamId, message) -> EventId:
        key = (_scope.get(), stream_id)
        events = self._streams.get(key)
        if events is None:
            events = self._streams[key] = deque()
            if len(self._streams) > self.max_streams:
                _, dropped = self._streams.popitem(last=False)
                for event_id, _ in dropped:
                    self._where.pop(event_id, None)
        else:
            self._streams.move_to_end(key)
        if len(events) >= self.max_events:
            self._where.pop(events.popleft()[0], None)
        event_id = str(next(self._ids))
        events.append((event_id, message))
        self._where[event_id] = key
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        key = self._where.get(last_event_id)
        if key is None:
            return None  # unknown, or dropped by the bounds: nothing to resume
        if key[0] != _scope.get() and not self.leaky:
            return None  # another session's event: never replayed to this one
        sent = int(last_event_id)  # ids count up in the process: what follows it is newer
        while newer := [(event_id, message) for event_id, message in self._streams.get(key, ()) if int(event_id) > sent]:
            for event_id, message in newer:  # each send waits for the client: more may come meanwhile
                sent = int(event_id)
                if message is not None:  # priming events carry no message
                    await send_callback(EventMessage(message, event_id))
        if self.replay_pause:
            await anyio.sleep(self.replay_pause)
        return key[1]


class SessionScopes:
    """ASGI middleware: each request runs with its session's event scope (see the module docstring)."""

    def __init__(self, app) -> None:
        self.app = app
        self._next = itertools.count(1)
        self._sessions: OrderedDict[bytes, int] = OrderedDict()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session = next((value for name, value in scope["headers"] if name.lower() == SESSION_HEADER), None)
        known = self._sessions.get(session) if session else None
        if known is not None:
            self._sessions.move_to_end(session)
        mine = known if known is not None else next(self._next)
        token = _scope.set(mine)

        async def learn(message) -> None:
            if message["type"] == "http.response.start":
                assigned = next((v for n, v in message.get("headers", ()) if n.lower() == SESSION_HEADER), None)
                if assigned and assigned != session:
                    self._sessions[assigned] = mine
                    if len(self._sessions) > MAX_SESSIONS:
                        self._sessions.popitem(last=False)
            await send(message)

        try:
            await self.app(scope, receive, learn if known is None else send)
        finally:
            _scope.reset(token)
