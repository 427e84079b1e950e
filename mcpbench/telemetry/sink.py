"""A trace's events → spans over OTLP and metrics: the one pipeline every exporting command runs.

`Telemetry` takes trace events (rebuilt with `trace/model.py`'s `Rebuild`, as `inspect` does,
or steps a `LiveFeed` rebuilt already), turns what they finish into calls and sessions
(`calls.py`), those into spans (`spans.py`) sent in batches (`otlp.py`) and into metrics
(`metrics.py`). Three ways in:

- `mcpbench export --otlp URL TRACE`: a whole trace, offline (`export_trace`);
- `mcpbench export --follow` (`follow`), the companion of `record` and the proxies: a trace followed
  as it is written (`live/feed.py`);
- the tee's recorder process: the lines it writes, handed over as it writes them (`LineFeed`),
  worked on in a thread of that process so the trace is never late for it.
"""

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from mcpbench.trace.model import EventEffect, Rebuild
from mcpbench.companions.options import TelemetryOptions
from mcpbench.protocol.errors import TraceError
from mcpbench.telemetry.calls import CallTracker, Finished, SessionDone, TracedCall
from mcpbench.trace.format import Kind


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Telemetry:
    """Spans and metrics of one trace's events.

    Args:
        options: where they go.
        live: a recording (never block, count what is dropped, serve metrics) rather than a
            finished trace (wait for the endpoint; spans only).
        warn: says a failure once, live.
    """

    def __init__(self, options: TelemetryOptions, *, live: bool, warn: Callable[[str], None] = say) -> None:
        from mcpbench.telemetry.spans import SpanMaker, resource

        self.options = options
        self.live = live
        self.rebuild = Rebuild(keep=False)
        self.tracker = CallTracker()
        self.resource = resource(options.service_name)
        self.spans = self.shipper = None
        if options.otlp:
            from mcpbench.telemetry.otlp import SpanShipper

            self.spans = SpanMaker(self.resource)
            self.shipper = SpanShipper(options.otlp, live=live, warn=warn)
        self.metrics = None
        if live and options.any:
            from mcpbench.telemetry.metrics import Metrics

            self.metrics = Metrics(
                self.resource, prometheus=options.metrics, otlp=options.otlp,
                open_sessions=lambda: [state for state in self.tracker.sessions.values() if not state.done], counts=self.counts,
            )
        self.calls = 0
        self.sessions = 0
        self.events_dropped = 0  # events never taken (the tee's feed fell behind)

    def counts(self) -> tuple[int, int]:
        """(spans exported, spans dropped) so far."""
        return (self.shipper.exported, self.shipper.dropped) if self.shipper else (0, 0)

    def take(self, events: Iterable[dict[str, Any]]) -> None:
        """Events in the trace's order, rebuilt here."""
        take = self.rebuild.take
        for event in events:
            self.take_step(event, take(event))

    def take_steps(self, steps: Iterable[tuple[dict[str, Any], EventEffect | None]]) -> None:
        """Events a `LiveFeed` rebuilt already, with their steps."""
        for event, step in steps:
            self.take_step(event, step)

    def take_step(self, event: dict[str, Any], step: EventEffect | None) -> None:
        if event["kind"] == Kind.TRACE and self.spans is not None:
            self.spans.header = event
        finished = self.tracker.take(event, step)
        if finished:
            self._emit(finished)

    def recorded(self, size: int) -> None:
        """`size` more bytes of trace were written."""
        if self.metrics is not None:
            self.metrics.recorded.add(size)

    def _emit(self, finished: list[Finished]) -> None:
        spans, shipper = self.spans, self.shipper
        for item in finished:
            kind = type(item)
            if kind is TracedCall:
                self.calls += 1
                if spans is not None:
                    shipper.add(spans.call(item))
            elif kind is SessionDone:
                self.sessions += 1
                if spans is not None:
                    shipper.add(spans.session(item))
        if self.metrics is not None:
            self.metrics.take(finished)

    def close(self) -> str | None:
        """The trace is over: end what is open, send what is left; the line that says how it went.

        Raises (offline):
            TargetError: the endpoint did not take a batch.
        """
        self._emit(self.tracker.finish())
        try:
            if self.shipper is not None:
                self.shipper.close()
        finally:
            if self.metrics is not None:
                self.metrics.close()
        if self.shipper is None:
            return None
        shipper = self.shipper
        line = f"mcpbench: OTLP: {shipper.exported} spans sent to {shipper.url} ({self.calls} calls, {self.sessions} sessions)"
        if self.live:
            line += f"; {shipper.dropped} dropped" + (f" ({shipper.failure})" if shipper.failure else "")
            if self.events_dropped:
                line += f"; {self.events_dropped} trace events not read (the exporter fell behind)"
        return line


def export_trace(paths: list[str], options: TelemetryOptions) -> list[str]:
    """Send the spans of whole traces (offline: waiting for the endpoint); the lines to say.

    Raises:
        TraceError: a trace cannot be read.
        TargetError: the endpoint did not take a batch.
    """
    from mcpbench.trace.reader import TraceReader

    lines = []
    for path in paths:
        telemetry = Telemetry(options, live=False)
        started = time.monotonic()
        telemetry.take(TraceReader(path))
        line = telemetry.close()
        lines.append(f"{line} from {path} in {time.monotonic() - started:.1f} s")
    return lines


# Trace bytes the tee's feed holds for its thread before it drops what comes (a burst of a
# second or two at 10,000 events/s).
FEED_BYTES = 16 * 1024 * 1024


class LineFeed:
    """The tee recorder's hand-over: trace lines as written, to a `Telemetry` in a thread.

    `__call__` (the recorder's loop) only queues the bytes and never blocks; past `FEED_BYTES` not
    yet taken, lines are dropped and counted. The thread parses them (the trace reader) and runs
    the pipeline. `close` lets it finish and says how it went.
    """

    def __init__(self, options: TelemetryOptions, path: str, header_line: bytes, warn: Callable[[str], None] = say) -> None:
        from mcpbench.trace.reader import TraceReader

        self.warn = warn
        self.telemetry = Telemetry(options, live=True, warn=warn)
        self.reader = TraceReader(path)
        self._queue: deque[bytes] = deque([header_line])
        self._queued = len(header_line)
        self._wake = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="mcpbench-telemetry", daemon=True)
        self._thread.start()

    def __call__(self, data: bytes) -> None:
        if self._queued + len(data) > FEED_BYTES:
            self.telemetry.events_dropped += data.count(b"\n")
            return
        self._queue.append(data)
        self._queued += len(data)
        self._wake.set()

    def _run(self) -> None:
        queue, telemetry = self._queue, self.telemetry
        while True:
            self._wake.wait()
            self._wake.clear()
            while queue:
                data = queue.popleft()
                self._queued -= len(data)
                telemetry.recorded(len(data))
                try:
                    telemetry.take(self.reader.feed(data))
                except TraceError:  # lines dropped before left a line without its start: go on
                    continue
            if self._closing:
                return

    def close(self, seconds: float = 10.0) -> None:
        """Take what is queued (for at most `seconds`), then send the rest and say how it went."""
        self._closing = True
        self._wake.set()
        self._thread.join(seconds)
        line = self.telemetry.close()
        if line:
            self.warn(line)


def follow(path: str, options: TelemetryOptions, *, until_eof: bool = False, poll: float = 0.05) -> None:
    """Follow a trace as it is written and send its spans and metrics live, until the recording
    is over (`LiveFeed.ended`), or, with `until_eof`, until standard input ends (a recorder's
    companion: its recorder closes the pipe when it stops); the trace is then read to its end.
    Says how it went on stderr, however it ends (Ctrl-C too).

    Raises:
        TraceError: the trace cannot be followed (missing, not a trace, a bad line).
    """
    import os
    import select

    from mcpbench.live.feed import LiveFeed

    telemetry = Telemetry(options, live=True)
    feed = LiveFeed(path)
    size = 0
    stdin_open = until_eof
    try:
        while True:
            telemetry.take_steps(feed.steps())
            try:
                now = os.stat(path).st_size
            except OSError:
                now = size
            if now > size:
                telemetry.recorded(now - size)
                size = now
            if until_eof:
                if not stdin_open and not feed.tail.behind:
                    telemetry.take_steps(feed.steps())  # what the recorder wrote last
                    break
                if select.select([0], [], [], poll)[0] and not os.read(0, 4096):
                    stdin_open = False
            elif feed.ended:
                break
            else:
                time.sleep(poll)
    finally:
        feed.tail.close()
        if line := telemetry.close():
            say(line)
