"""`serve-trace`'s `subscriptions/listen` streams (2026-07-28): held open, the recorded changes played
after the requests that caused them, with no I/O.

A recorded listen stream holds its acknowledgement and the change notifications the server sent
on it. Each change is filed under its cause, the latest request of the recording sent after the
listen opened and before the change came (`toggle_tool`, say: it changed the tool list); a change
that no request preceded is played at its recorded offset from the stream's start, as the
acknowledgement is. The mock acknowledges a live listen at once, then holds its stream open: when
it has answered a live request from a recorded cause, the changes that cause brought go to every
live stream of that recorded listen (a real server tells the streams open at the time, never one
opened later). Every notification is tagged with the live listen's id
(`io.modelcontextprotocol/subscriptionId`). The stream ends when the client closes it (its HTTP
response stream, or a `notifications/cancelled` naming it), its session ends, or the mock stops;
a listen the recording saw answered is answered as recorded once its changes are played.
"""

import queue
import threading
from dataclasses import dataclass, field
from typing import Any

from mcpbench.protocol.jsonrpc import Notification
from mcpbench.protocol.versions import LISTEN, LISTEN_ACKNOWLEDGED, META_SUBSCRIPTION_ID, same_era
from mcpbench.replay.plan import RecordedCall, TracePlan


@dataclass(slots=True)
class ListenScript:
    """One recorded listen stream: what is played at offsets, and the changes each cause brought."""

    call: RecordedCall
    opening: list[tuple[float, dict]] = field(default_factory=list)  # (offset from the listen, note): ack, uncaused
    caused: dict[int, list[dict]] = field(default_factory=dict)  # id(cause call) -> its notes, in order

    @property
    def acknowledged(self) -> bool:
        return any(note.get("method") == LISTEN_ACKNOWLEDGED for _, note in self.opening)


@dataclass(eq=False, slots=True)
class HeldListen:
    """A live listen the mock holds: where its changes are queued (None ends it)."""

    session: Any
    request_id: Any
    script: ListenScript
    owner: "MockListens"
    inbox: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    closed: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False  # the client cancelled it (a cancelled request gets no answer)

    def close(self, cancelled: bool = False) -> None:
        self.cancelled = self.cancelled or cancelled
        self.closed.set()
        self.inbox.put(None)

    def finish(self) -> None:
        """The stream is over (its player says): it is forgotten."""
        self.closed.set()
        self.owner.forget(self)


def tagged(note: dict, request_id: Any) -> Notification:
    """A recorded notification of a listen stream, tagged as the live listen's (`request_id`)."""
    params = note.get("params")
    if isinstance(params, dict) and isinstance(params.get("_meta"), dict) and META_SUBSCRIPTION_ID in params["_meta"]:
        params = {**params, "_meta": {**params["_meta"], META_SUBSCRIPTION_ID: request_id}}
    return Notification(method=note["method"], params=params, _parsed=True)


def _scripts(trace: TracePlan) -> tuple[dict[int, ListenScript], dict[int, list[tuple[ListenScript, dict]]]]:
    """The recorded listens (by id of their call) and the changes each recorded call caused."""
    listens: dict[int, ListenScript] = {}
    causes: dict[int, list[tuple[ListenScript, dict]]] = {}
    for session in trace.sessions:
        for call in session.calls:
            if call.method != LISTEN:
                continue
            script = listens[id(call)] = ListenScript(call)
            # The requests that may have caused a change: this session's, and, in an era without
            # sessions (each recorded connection its own plan), every session's of the same era.
            pool = [c for s in trace.sessions if s is session or (session.era is not None and same_era(s.version, session.version)
                                                                   and not session.handshake and not s.handshake)
                    for c in s.calls if c.method != LISTEN]
            for ts, note in call.server:
                if not isinstance(note, dict):
                    continue
                cause = None
                if note.get("method") != LISTEN_ACKNOWLEDGED:
                    before = [c for c in pool if call.sent <= c.sent <= ts]
                    cause = max(before, key=lambda c: c.sent) if before else None
                if cause is None:
                    script.opening.append((max(0.0, ts - call.sent), note))
                else:
                    script.caused.setdefault(id(cause), []).append(note)
                    causes.setdefault(id(cause), []).append((script, note))
    return listens, causes


class MockListens:
    """The recorded listens and the live streams held for them. Thread-safe."""

    def __init__(self, trace: TracePlan) -> None:
        self._scripts, self._causes = _scripts(trace)
        self._open: list[HeldListen] = []
        self._lock = threading.Lock()
        self.idle = threading.Event()  # no stream is held (what a shell or a test may wait for)
        self.idle.set()

    def script(self, call: RecordedCall) -> ListenScript | None:
        return self._scripts.get(id(call))

    def causes(self, call: RecordedCall) -> bool:
        """Whether answering `call` brings changes to listen streams."""
        return id(call) in self._causes

    def open(self, session: Any, request_id: Any, script: ListenScript) -> HeldListen:
        stream = HeldListen(session, request_id, script, self)
        with self._lock:
            self._open.append(stream)
            self.idle.clear()
        return stream

    def served(self, call: RecordedCall) -> None:
        """A live request was answered from the recorded `call`: the changes it caused go to the open streams."""
        for script, note in self._causes.get(id(call), ()):
            with self._lock:
                streams = [s for s in self._open if s.script is script and not s.closed.is_set()]
            for stream in streams:
                stream.inbox.put(tagged(note, stream.request_id))

    def cancel(self, session: Any, request_id: Any) -> None:
        """The client cancelled its listen `request_id` (`notifications/cancelled`)."""
        self._close(lambda s: s.session == session and s.request_id == request_id, cancelled=True)

    def end(self, session: Any) -> None:
        """A client session ended: its streams end."""
        self._close(lambda s: s.session == session)

    def stop(self) -> None:
        """The mock stops: every stream ends."""
        self._close(lambda s: True)

    def forget(self, stream: HeldListen) -> None:
        with self._lock:
            if stream in self._open:
                self._open.remove(stream)
            if not self._open:
                self.idle.set()

    def _close(self, which, cancelled: bool = False) -> None:
        with self._lock:
            streams = [s for s in self._open if which(s)]
        for stream in streams:
            stream.close(cancelled)


__all__ = ["MockListens", "ListenScript", "HeldListen", "tagged"]
