"""One call's reply, played to the client: the recorded messages in order and spacing, then the answer.

A server's progress notifications come spaced out while it works, its answer
last. A client may dispatch notifications a step later than answers (a widely
used SDK does, and drops a call's progress callback once its answer is in): a
mock that wrote them back to back would lose them for it. So the mock keeps
the recorded order and the recorded gaps between the messages of one call
(`--pace`: as recorded, scaled, or none; each gap at most `--max-gap`).
Server requests are sent and their answers awaited (at most `ASK_TIMEOUT`). A listen stream is
held after its acknowledgement, its changes written as they come (`mock_listen.py`), until it is
closed; a change a call caused is told once the call's answer is written (`RecordedReply.after`).
"""

import queue
import threading
import time
from collections.abc import Callable

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.errors import LocalProtocolError
from mcpbench.protocol.jsonrpc import Message, Request, Response
from mcpbench.protocol.server import Call, ServerConnection
from mcpbench.replay.engine import Pace
from mcpbench.replay.mock_answers import RecordedReply
from mcpbench.replay.plan import Ask

# How long the mock waits for a client to answer a recorded server request before it
# sends the recorded final answer anyway.
ASK_TIMEOUT = 10.0

# serve-trace's default pacing: the recorded gaps, none longer than a second (a recording of a
# slow tool must not make every mock call as slow).
DEFAULT_MAX_GAP = 1.0
DEFAULT_PACE = Pace(1.0, DEFAULT_MAX_GAP)

# The shortest wait before an answer that follows other messages of its call (with any pace but
# `fast`). A server's last progress and its answer are often recorded a fraction of a millisecond
# apart, less than a busy machine may take to wake a client: the client then reads both at once, and
# one that dispatches notifications after answers loses that progress. A few milliseconds, once per
# such call, make the two separate reads on a loaded 2-core machine; gaps between notifications
# need no floor (their order survives whatever the reads).
ANSWER_GAP = 0.005

# How often a held listen stream looks up from its queue to see whether its client has gone.
HOLD_POLL = 0.25

Write = Callable[[bytes], None]


def answer_of(call: Call, reply: RecordedReply) -> Message:
    """The recorded answer, under the client's request id."""
    return jsonrpc.from_obj({"jsonrpc": "2.0", "id": call.request.id, **reply.answer})


class Player:
    """Plays replies over one `ServerConnection`, which a shell's threads share under `lock`."""

    def __init__(self, conn: ServerConnection, lock: threading.Lock, pace: Pace = DEFAULT_PACE) -> None:
        self.conn = conn
        self.lock = lock
        self.pace = pace

    def play(self, call: Call, reply: RecordedReply, write: Write, gone: Callable[[], bool] | None = None) -> None:
        """Write `reply`'s messages for `call` through `write`, paced, the answer last.

        `write` raising OSError (the client went away) ends the call unanswered; so does `gone()`
        turning true while a listen stream is held (its client closed the stream).
        """
        try:
            if reply.relay is not None:
                reply.relay(call.request, lambda message: self._send(call, message, write),
                            lambda method, params: self._ask(call, write, method, params))
                return
            started = time.monotonic()
            due = last = 0.0  # the first server message leaves at once: its offset is 0
            for at, item in reply.timeline:
                due += self.pace.gap(at - last)
                last = at
                _wait_until(started + due)
                if type(item) is Ask:
                    self._ask(call, write, item.method, item.params)
                else:
                    self._send(call, item, write)
            if reply.hold is not None:
                if not self._hold(call, reply, write, gone):
                    raise OSError("the listen stream ended unanswered")
            elif reply.timeline:
                _wait_until(started + due + self._answer_gap(reply.answer_at - last))
            self._send(call, answer_of(call, reply), write)
            if reply.after is not None:
                reply.after()
        except OSError:
            with self.lock:
                self.conn.abandon(call)

    def _hold(self, call: Call, reply: RecordedReply, write: Write, gone: Callable[[], bool] | None) -> bool:
        """Write a listen stream's changes as they come until it is closed; whether it is to be answered
        (the recording saw it answered, and the client has not cancelled it: a cancelled request gets no answer)."""
        stream = reply.hold
        try:
            while not stream.closed.is_set():
                try:
                    note = stream.inbox.get(timeout=HOLD_POLL)
                except queue.Empty:
                    if gone is not None and gone():
                        return False
                    continue
                if note is None:
                    break
                self._send(call, note, write)
        finally:
            stream.finish()
        return bool(reply.answer) and not stream.cancelled
    def _answer_gap(self, recorded: float) -> float:
        """The wait before an answer that follows other messages: as the pace says, and with any pace
        at least `ANSWER_GAP`."""
        if self.pace.factor is None:
            return 0.0
        return max(ANSWER_GAP, self.pace.gap(recorded))

    def final(self, call: Call, reply: RecordedReply) -> Message:
        """Just the answer of `reply` (a JSON body has room for nothing else: a listen stream is refused)."""
        if reply.hold is not None:
            reply.hold.close()
            reply.hold.finish()
            return jsonrpc.from_obj({"jsonrpc": "2.0", "id": call.request.id, "error": {
                "code": jsonrpc.INVALID_REQUEST, "message": "mcpbench serve-trace: a listen stream needs an SSE response "
                                                            "(this mock answers in JSON)"}})
        if reply.relay is None:
            return answer_of(call, reply)
        sent: list[Message] = []
        reply.relay(call.request, sent.append, lambda method, params: None)
        return sent[-1]

    def _send(self, call: Call, message: Message, write: Write) -> None:
        with self.lock:
            data = self.conn.event(call, message)
        write(data)

    def _ask(self, call: Call, write: Write, method: str, params: dict | None) -> Response | None:
        """Ask the client `method` while `call` runs; its answer, or None (none in time, or not allowed)."""
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        with self.lock:
            try:
                request: Request = self.conn.ask(call, method, params, waiter=inbox)
            except LocalProtocolError:
                return None  # this client's version forbids server requests
            data = self.conn.event(call, request)
        try:
            write(data)
            return inbox.get(timeout=ASK_TIMEOUT)
        except queue.Empty:
            return None
        finally:
            with self.lock:
                self.conn.give_up(request.id)


def _wait_until(deadline: float) -> None:
    left = deadline - time.monotonic()
    if left > 0:
        time.sleep(left)
