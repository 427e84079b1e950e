"""2026-07-28 check: a `subscriptions/listen` stream is acknowledged at once, and the changes it asked for
arrive through the deployment as the server sends them.

The stream is one long-lived POST (SEP-2575): the server acknowledges on its response stream
(`notifications/subscriptions/acknowledged`), then sends each change there. A proxy that buffers
the response holds both back until the stream ends, which for a listen stream is never: the
client hears nothing. The probe opens a stream asking for `toolsListChanged`, waits for the
acknowledgement, then causes a change where it can (the lab's `toggle_tool`, on the stream's own
instance behind a balancer: a change is heard by the streams of the instance it happened on), and
times its notification. The catalogue is toggled back afterwards.
"""

import threading
import time
from collections import Counter

from mcpbench.probe import newest
from mcpbench.probe.checks.buffering import FIX
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow
from mcpbench.probe.wire import WireError
from mcpbench.protocol.client import Answered, PostHead, Pushed
from mcpbench.protocol.listen import Acknowledged, Change, Listen
from mcpbench.protocol.versions import LISTEN
from mcpbench.transport.base import shut_socket

NAME, TITLE, BOUND = "listen", "Listen streams (2026-07-28)", 12.0
TYPES = ("toolsListChanged",)
# The lab's tool that changes the tool list (and says so to listen streams).
CHANGER = "toggle_tool"
# Seconds to wait for the acknowledgement, and for a change after the call that caused it.
ACK_WAIT, CHANGE_WAIT = 3.0, 3.0
# A notification later than this after the call that caused it came late (the server sends it during the call).
LATE = 1.0


class _Stream:
    """One listen stream, read on a thread of its own while the check goes on."""

    def __init__(self, target: ProbeTarget) -> None:
        self.session = newest.session(target)
        self.listen = Listen(TYPES)
        self.acked, self.changed = threading.Event(), threading.Event()
        self.changes: list[float] = []  # perf_counter times
        self.reply = None
        self.error: str | None = None
        self.held = False  # no head came in time
        self.ended: str | None = None
        self._thread: threading.Thread | None = None

    def open(self, deadline: float) -> None:
        out = self.session.conn.send(self.session.conn.prepare(LISTEN, self.listen.params()), ts=time.perf_counter())
        self.listen.opened(out.request_id, time.perf_counter())
        try:  # the head within the acknowledgement's wait: a proxy holding the whole answer back sends none
            self.reply = self.session.wire.request("POST", out.headers, out.data, deadline=min(deadline, time.monotonic() + ACK_WAIT))
        except WireError as exc:
            self.error, self.held = str(exc), exc.timed_out
            return
        reader = self.session.conn.reader(PostHead(out, self.reply.status, self.reply.content_type))
        self._thread = threading.Thread(target=self._read, args=(reader, deadline), name="mcpbench-probe-listen", daemon=True)
        self._thread.start()

    def _read(self, reader, deadline: float) -> None:
        for chunk, ts in self.reply.chunks(deadline):
            for event in reader.feed(chunk, ts):
                if type(event) is Pushed:
                    got = self.listen.take(event.message, ts)
                    if type(got) is Acknowledged:
                        self.acked.set()
                    elif type(got) is Change:
                        self.changes.append(ts)
                        self.changed.set()
                elif type(event) is Answered:
                    self.ended = str(self.listen.answered(event.answer).detail)
            if not chunk:
                return

    def close(self) -> None:
        if self.reply is not None:
            # Closing the response stream is how a client stops listening. The socket is shut first, so
            # the reading thread sees the end and returns; the connection is closed once it has.
            shut_socket(self.reply.conn.sock)
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self.reply is not None:
            self.reply.close()
        self.session.close()


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if (row := newest.skip(NAME, target, deadline)) is not None:
        return row
    stream = _Stream(target)
    figures: dict = {"asked": list(TYPES)}
    toggled: Counter = Counter()
    try:
        stream.open(deadline)
        figures.update(status=stream.reply.status if stream.reply else None, error=stream.error, held=stream.held,
                       content_type=stream.reply.content_type if stream.reply else None,
                       instance=stream.reply.instance if stream.reply else None)
        if stream.reply is not None and stream.acked.wait(min(ACK_WAIT, max(0.0, deadline - time.monotonic()))):
            figures["ack_after"] = round(stream.listen.acknowledged.after, 4)
            if newest.has_tool(target, CHANGER):
                figures["change"] = _cause_change(target, stream, toggled, deadline)
        figures["ended"] = stream.ended
    finally:
        stream.close()
        _restore(target, toggled, deadline)
    return judge(figures)


def _cause_change(target: ProbeTarget, stream: _Stream, toggled: Counter, deadline: float) -> dict:
    """Call the changer until it reaches the stream's instance; when its notification came."""
    where = stream.reply.instance
    for tries in range(1, newest.INSTANCE_TRIES + 1):
        one = newest.session(target)
        sent = time.perf_counter()
        try:
            ex = one.call("tools/call", {"name": CHANGER, "arguments": {}}, deadline=deadline)
        finally:
            one.close()
        answered = time.perf_counter()
        toggled[ex.instance] += 1
        if where is not None and ex.instance is not None and ex.instance != where:
            continue  # another instance's catalogue changed: not this stream's to hear
        heard = stream.changed.wait(min(CHANGE_WAIT, max(0.0, deadline - time.monotonic())))
        if heard or where is not None or ex.instance is not None:
            return {"tries": tries, "on": ex.instance, "answer_after": round(answered - sent, 4),
                    "heard_after": round(stream.changes[0] - sent, 4) if heard else None}
    return {"tries": newest.INSTANCE_TRIES, "on": None, "missed": True}


def _restore(target: ProbeTarget, toggled: Counter, deadline: float) -> None:
    """Toggle back where the check toggled an odd number of times (best effort, bounded)."""
    for instance, times in toggled.items():
        if times % 2:
            newest.on_instance(target, instance, lambda s: s.call("tools/call", {"name": CHANGER, "arguments": {}},
                                                                     deadline=deadline), deadline=deadline)


def judge(figures: dict) -> CheckRow:
    if figures.get("held"):
        return CheckRow(NAME, FAIL, f"{LISTEN}: no answer, not even its head, within {ACK_WAIT:g} s: the stream is held back (a proxy "
                   "buffering the response never forwards a stream that does not end)", FIX, figures)
    if figures.get("error") or (figures.get("status") or 0) >= 300:
        said = figures.get("error") or f"HTTP {figures.get('status')}"
        return CheckRow(NAME, FAIL, f"{LISTEN} was not served: {said}", "Serve subscriptions/listen (the SDKs speaking 2026-07-28 "
                   "do) and let it through the proxy as a long-lived streamed POST.", figures)
    on = f" (on {figures['instance']})" if figures.get("instance") else ""
    if "ack_after" not in figures:
        ended = f"; the stream ended: {figures['ended']}" if figures.get("ended") else ""
        return CheckRow(NAME, FAIL, f"{LISTEN}{on}: no acknowledgement within {ACK_WAIT:g} s{ended}: the stream is held back "
                   "(a proxy buffering the response never forwards a stream that does not end)", FIX, figures)
    evidence = f"{LISTEN}{on}: acknowledged after {figures['ack_after']:.2f} s"
    change = figures.get("change")
    if change is None:
        return CheckRow(NAME, PASS, evidence + f"; no change caused (the probe calls {CHANGER} on the lab's reference server only): "
                   "the acknowledgement alone measured",
                   figures=figures)
    if change.get("missed"):
        return CheckRow(NAME, WARN, evidence + f"; {CHANGER} never reached the stream's instance in {change['tries']} calls: "
                   "delivery not measured", figures=figures)
    if change["heard_after"] is None:
        return CheckRow(NAME, FAIL, evidence + f"; {CHANGER} answered{' on ' + change['on'] if change.get('on') else ''} after "
                   f"{change['answer_after']:.2f} s, yet no tools/list_changed came within {CHANGE_WAIT:g} s: held back",
                   FIX, figures)
    evidence += f"; tools/list_changed {change['heard_after']:.2f} s after {CHANGER} was sent ({change['tries']} call(s))"
    if change["heard_after"] > change["answer_after"] + LATE:
        return CheckRow(NAME, WARN, evidence + ": late", FIX, figures)
    return CheckRow(NAME, PASS, evidence, figures=figures)
