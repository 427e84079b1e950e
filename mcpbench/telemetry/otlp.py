"""Spans to an OTLP/HTTP endpoint (protobuf), in batches, through OpenTelemetry's exporter.

Two ways to send, one per use:

- live (`tee`/`record --otlp`, the proxies): `add` only appends to a bounded queue and never
  blocks; a thread of its own sends a batch when one is full or every `INTERVAL` seconds. A full
  queue, or a batch the endpoint refused or never took, is dropped and counted (`dropped`); the
  first failure is said once (`warn`), and `close` gives what is left a few seconds.
- offline (`mcpbench export --otlp`): `add` sends each full batch at once and waits for it; an
  endpoint that fails is the end of the export (`TargetError`, exit 3), not a count.

The exporter's own log (a line per failed batch, with retries) is kept from stderr: its reason
becomes the one warning.
"""

import logging
import re
import threading
from collections import deque
from collections.abc import Callable

from mcpbench.companions.options import TRACES_PATH, signal_url
from mcpbench.protocol.errors import TargetError

# Spans per export request (the SDK's batch processor sends 512).
BATCH = 512
# Spans waiting to be sent, live, before new ones are dropped (the SDK's default queue is 2048:
# a recorder's burst of a few seconds fits in this one).
QUEUE = 16_384
# How often a live queue is sent when no batch has filled.
INTERVAL = 1.0
# How long one export request may take, retries included: live, a slow endpoint costs the queue;
# offline, it is the whole export's wait.
LIVE_TIMEOUT = 3.0
OFFLINE_TIMEOUT = 10.0
# How long `close` waits, live, for what is still queued: a tee's host waits for the tee to exit.
CLOSE_SECONDS = 3.0

class _Reasons(logging.Handler):
    """Keeps the last failure the exporter logged (its loggers write nothing to stderr)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        reason = short_reason(record.getMessage())
        if self.last is None or reason not in GENERIC:  # "refused" says more than the retries' "timed out"
            self.last = reason


# What the exporter says when its retries ran out: a reason logged before it says more.
GENERIC = frozenset({"timed out", "failed"})


def short_reason(text: str) -> str:
    """The words of an exporter's failure a person needs: the OS error, or the HTTP status."""
    if found := re.search(r"\[Errno -?\d+\] ([^'\")]+)", text):
        return found.group(1).strip().lower()
    if found := re.search(r"code: (\d{3})", text):
        return f"HTTP {found.group(1)}"
    if found := re.search(r"Transient error (.+?) encountered", text):  # a status the exporter retries (429, 502-504)
        return found.group(1).lower()
    if "timed out" in text.lower() or "timeout" in text.lower():
        return "timed out"
    return text.splitlines()[0][:160] if text else "failed"


_REASONS = _Reasons()


def quiet_sdk_logs() -> _Reasons:
    """Route the SDK's and exporters' log records to the one reason keeper, off stderr."""
    logger = logging.getLogger("opentelemetry")
    if _REASONS not in logger.handlers:
        logger.addHandler(_REASONS)
        logger.propagate = False
        logger.setLevel(logging.WARNING)
    return _REASONS


class SpanShipper:
    """Spans to one OTLP/HTTP endpoint, in batches.

    Args:
        url: the endpoint (`signal_url` makes it the traces one).
        live: send from a thread of its own and never block (else: send as batches fill, waiting).
        warn: says the first failure (live), once.

    Attributes:
        exported, dropped: spans the endpoint took; spans given up (live only).
        failure: why the first batch failed, or None.
    """

    def __init__(self, url: str, *, live: bool, warn: Callable[[str], None] | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.url = signal_url(url, TRACES_PATH)
        self.live = live
        self.warn = warn or (lambda line: None)
        self.reasons = quiet_sdk_logs()
        self.exporter = OTLPSpanExporter(endpoint=self.url, timeout=LIVE_TIMEOUT if live else OFFLINE_TIMEOUT)
        self.exported = 0
        self.dropped = 0
        self.failure: str | None = None
        self._queue: deque = deque()
        self._sending = 0  # spans in the request under way (live)
        # Live, the sending thread and `close` both count: under this lock a batch is taken from the
        # queue and counted once, and once `close` has given up (`_abandoned`, counting the batch
        # under way as dropped) the thread counts nothing more, so the line `close`'s caller says holds.
        self._lock = threading.Lock()
        self._abandoned = False
        self._warned = threading.Event()  # the first failure has been said
        self._wake = threading.Event()
        self._closing = False
        self._recovered = True  # the last batch went (or none was sent yet)
        self._thread: threading.Thread | None = None
        if live:
            self._thread = threading.Thread(target=self._run, name="mcpbench-otlp", daemon=True)
            self._thread.start()

    def add(self, span) -> None:
        """Queue one span (live: never blocks; a full queue drops it). Offline, a full batch is sent now.

        Raises (offline):
            TargetError: the endpoint did not take a batch.
        """
        queue = self._queue
        if self.live:
            with self._lock:
                if len(queue) >= QUEUE or self._abandoned:
                    self.dropped += 1
                    return
                queue.append(span)
            if len(queue) >= BATCH:
                self._wake.set()
        else:
            queue.append(span)
            if len(queue) >= BATCH:
                self._send_now()

    def close(self) -> None:
        """Send what is left (live: for at most `CLOSE_SECONDS`; what is still queued then is dropped).

        Raises (offline):
            TargetError: the endpoint did not take a batch.
        """
        try:
            if not self.live:
                self._send_now()
                return
            self._closing = True
            self._wake.set()
            # An endpoint that failed is given no more time: what is left is dropped at once.
            self._thread.join(0 if self.failure and not self._recovered else CLOSE_SECONDS)
            first = False
            with self._lock:
                if self._thread.is_alive():  # the endpoint is slow or gone: give up on the rest
                    self._abandoned = True
                    self.dropped += len(self._queue) + self._sending
                    self._queue.clear()
                    if self.failure is None:  # the first batch is still under way: say what it met so far
                        self.failure = self.reasons.last or f"no answer within {CLOSE_SECONDS:g} s"
                        first = True
            if first:
                self._warn_failed()
            elif self.failure is not None:  # the thread may be saying it now: before the caller's last line
                self._warned.wait(CLOSE_SECONDS)
        finally:
            self.exporter.shutdown()

    def _send_now(self) -> None:
        while self._queue:
            batch = [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]
            if not self._export(batch):
                raise TargetError(f"OTLP endpoint {self.url}: {self.failure}")

    def _export(self, batch: list) -> bool:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.reasons.last = None
        try:
            ok = self.exporter.export(batch) is SpanExportResult.SUCCESS
        except Exception as exc:  # noqa: BLE001 - an exporter bug must not end a recording
            self.reasons.last = short_reason(str(exc))
            ok = False
        if not self.live:
            self._settle(batch, ok)
        return ok

    def _settle(self, batch: list, ok: bool) -> bool:
        """Count a batch that went or failed (live: under the lock, by the sending thread); whether
        it was the first failure."""
        if ok:
            self.exported += len(batch)
            self._recovered = True
            return False
        self._recovered = False
        if self.live:
            self.dropped += len(batch)
        if self.failure is not None:
            return False
        self.failure = self.reasons.last or "failed"
        return True

    def _warn_failed(self) -> None:
        """Say the first failure, live (outside the lock: stderr may block)."""
        self.warn(f"mcpbench: warning: OTLP export to {self.url} failed ({self.failure}); the capture goes on, spans not sent are counted")
        self._warned.set()

    def _run(self) -> None:
        """Send the whole queue, a batch at a time, whenever a batch fills or `INTERVAL` passes."""
        queue = self._queue
        while True:
            self._wake.wait(INTERVAL)
            self._wake.clear()
            while True:
                with self._lock:
                    if self._abandoned or not queue:
                        break
                    count = min(BATCH, len(queue))
                    batch = [queue.popleft() for _ in range(count)]
                    self._sending = count
                ok = self._export(batch)
                with self._lock:
                    self._sending = 0
                    if self._abandoned:  # `close` gave up on this batch and counted it dropped
                        return
                    first = self._settle(batch, ok)
                if first:
                    self._warn_failed()
            if self._closing or self._abandoned:
                return
