"""A small OTLP/HTTP receiver for tests: it decodes what it gets with `opentelemetry-proto`.

    with OtlpReceiver() as receiver:
        ... send to receiver.url ...
        spans = receiver.wait_for(lambda spans: len(spans) >= 3)

Spans come back as plain dicts (name, ids in hex, parent, kind, attributes, events, links,
status, times, resource), metrics as (name, data point attributes, value) rows. `status` makes it
answer every request with that HTTP status instead (a refusing endpoint); `held` makes it take each
request and answer only once the test calls `release()` (a slow endpoint, under way on cue).
"""

import gzip
import http.server
import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span

# How long a held request waits for `release()` at most (the test failed before releasing it).
HOLD_BOUND = 20.0
KINDS = {Span.SPAN_KIND_CLIENT: "CLIENT", Span.SPAN_KIND_SERVER: "SERVER", Span.SPAN_KIND_INTERNAL: "INTERNAL"}


def value_of(any_value) -> Any:
    field = any_value.WhichOneof("value")
    return getattr(any_value, field) if field else None


def attributes_of(pairs) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs}


def span_dict(span, resource: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": span.name,
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent": span.parent_span_id.hex() or None,
        "kind": KINDS.get(span.kind, str(span.kind)),
        "attributes": attributes_of(span.attributes),
        "events": [{"name": event.name, "attributes": attributes_of(event.attributes), "time": event.time_unix_nano} for event in span.events],
        "links": [{"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()} for link in span.links],
        "status": {0: "UNSET", 1: "OK", 2: "ERROR"}[span.status.code],
        "status_message": span.status.message,
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "resource": resource,
    }


class OtlpReceiver:
    """An OTLP/HTTP endpoint on 127.0.0.1 (an ephemeral port), in a thread of the test."""

    def __init__(self, status: int = 200, *, held: bool = False) -> None:
        self.status = status
        self._released = threading.Event()
        if not held:
            self._released.set()
        self.spans: list[dict[str, Any]] = []
        self.metrics: list[tuple[str, dict[str, Any], Any]] = []
        self.requests = 0
        self._changed = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.take(self.path, self.headers.get("content-type"), body)
                receiver._released.wait(HOLD_BOUND)
                payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(receiver.status)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def take(self, path: str, content_type: str | None, body: bytes) -> None:
        with self._changed:
            self.requests += 1
            if self.status != 200:
                self._changed.notify_all()
                return
            assert content_type == "application/x-protobuf", content_type
            if path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    resource = attributes_of(resource_spans.resource.attributes)
                    for scope in resource_spans.scope_spans:
                        self.spans += [span_dict(span, resource) for span in scope.spans]
            elif path == "/v1/metrics":
                request = ExportMetricsServiceRequest.FromString(body)
                for resource_metrics in request.resource_metrics:
                    for scope in resource_metrics.scope_metrics:
                        for metric in scope.metrics:
                            data = metric.WhichOneof("data")
                            for point in getattr(metric, data).data_points:
                                value = point.count if data == "histogram" else (point.as_int or point.as_double)
                                self.metrics.append((metric.name, attributes_of(point.attributes), value))
            self._changed.notify_all()

    def wait_for(self, enough: Callable[[list[dict[str, Any]]], bool], timeout: float = 20.0) -> list[dict[str, Any]]:
        """The spans received, once `enough(spans)` holds (or the timeout passed: the caller's
        assertions then say what is missing)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not enough(self.spans) and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)
            return list(self.spans)

    def __enter__(self) -> "OtlpReceiver":
        self._thread.start()
        return self

    def release(self) -> None:
        """Answer the requests held, and those to come."""
        self._released.set()

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()
