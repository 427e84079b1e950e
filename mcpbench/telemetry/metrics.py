"""Metrics of a capture: OpenTelemetry instruments, read by Prometheus (`--metrics`) and OTLP (`--otlp`).

One set of instruments (the OpenTelemetry SDK's), two readers: Prometheus's client library serves
them in the text exposition format on `--metrics HOST:PORT` (`/metrics`; names as OpenTelemetry's
Prometheus exporter spells them: `mcp.client.operation.duration` in seconds is
`mcp_client_operation_duration_seconds`), and with `--otlp` they are pushed every `OTLP_INTERVAL`.

| instrument | kind | labels |
|---|---|---|
| `mcp.client.operation.duration`, `mcp.server.operation.duration` | histogram, s | method, tool or prompt, error.type, protocol version, transport, era, outcome |
| `mcp.client.session.duration` | histogram, s | protocol version, transport, era, error.type |
| `mcpbench.calls` | counter | as the operation durations |
| `mcpbench.errors` | counter | error class, transport |
| `mcpbench.violations` | counter | violation code, transport |
| `mcpbench.sessions.open` | gauge | transport, era |
| `mcpbench.recorded` | counter, bytes | — |
| `mcpbench.spans.exported`, `mcpbench.spans.dropped` | counters | — |

Client operations are the client's requests (the recording is the client's view); the server's
requests to the client are server operations, as the conventions have it. Tool and prompt names,
error types and classes and violation codes are label values from the traffic: each label keeps
its first `MAX_LABEL_VALUES` and folds the rest into `other`.
"""

from collections.abc import Callable, Iterable
from typing import Any

from mcpbench.telemetry import conventions as otel
from mcpbench.telemetry.calls import SessionDone, TracedCall, TracedProblem, TrackedSession

# How often metrics are pushed over OTLP.
OTLP_INTERVAL_MS = 5_000
# How long the last push at the end may take.
SHUTDOWN_MS = 3_000


class Metrics:
    """The instruments, fed by finished calls, sessions and problems.

    Args:
        resource: the OpenTelemetry resource (`spans.resource`).
        prometheus: serve `/metrics` here (host, port), or None.
        otlp: push to this OTLP/HTTP URL (`otlp.signal_url`), or None.
        open_sessions: gives the sessions open now (read when metrics are collected).
        counts: gives (spans exported, spans dropped) now.
    """

    def __init__(
        self,
        resource,
        *,
        prometheus: tuple[str, int] | None = None,
        otlp: str | None = None,
        open_sessions: Callable[[], Iterable[TrackedSession]] = tuple,
        counts: Callable[[], tuple[int, int]] = lambda: (0, 0),
    ) -> None:
        from opentelemetry.metrics import CallbackOptions, Observation
        from opentelemetry.sdk.metrics import MeterProvider

        readers = []
        if prometheus is not None:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import start_http_server

            readers.append(PrometheusMetricReader())
            host, port = prometheus
            self.server, self.thread = start_http_server(port, addr=host)
        else:
            self.server = None
        if otlp is not None:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            from mcpbench.companions.options import METRICS_PATH, signal_url
            from mcpbench.telemetry.otlp import LIVE_TIMEOUT, quiet_sdk_logs

            quiet_sdk_logs()
            exporter = OTLPMetricExporter(endpoint=signal_url(otlp, METRICS_PATH), timeout=LIVE_TIMEOUT)
            readers.append(PeriodicExportingMetricReader(exporter, export_interval_millis=OTLP_INTERVAL_MS))
        self.provider = MeterProvider(resource=resource, metric_readers=readers)
        meter = self.provider.get_meter("mcpbench")
        buckets = list(otel.DURATION_BUCKETS)
        self.client_duration = meter.create_histogram(
            "mcp.client.operation.duration", unit="s", explicit_bucket_boundaries_advisory=buckets,
            description="The duration of the MCP request as observed on the client, from its sending until its answer.",
        )
        self.server_duration = meter.create_histogram(
            "mcp.server.operation.duration", unit="s", explicit_bucket_boundaries_advisory=buckets,
            description="The duration of a server's request to the client, as the client received and answered it.",
        )
        self.session_duration = meter.create_histogram(
            "mcp.client.session.duration", unit="s", explicit_bucket_boundaries_advisory=buckets,
            description="The duration of the MCP session as observed on the client.",
        )
        self.calls = meter.create_counter("mcpbench.calls", unit="{call}", description="Requests answered or ended unanswered.")
        self.errors = meter.create_counter("mcpbench.errors", unit="{error}", description="Failed calls and transport errors, by class.")
        self.violations = meter.create_counter("mcpbench.violations", unit="{violation}", description="Protocol violations, by code.")
        self.recorded = meter.create_counter("mcpbench.recorded", unit="By", description="Bytes of trace written.")

        def sessions_open(options: CallbackOptions) -> list:
            tally: dict[tuple[str, str], int] = {}
            for state in list(open_sessions()):
                if not state.sessionless:
                    key = (state.transport, state.era or "unknown")
                    tally[key] = tally.get(key, 0) + 1
            return [Observation(n, {otel.TRANSPORT: t, otel.ERA: e}) for (t, e), n in tally.items()]

        meter.create_observable_gauge("mcpbench.sessions.open", [sessions_open], unit="{session}", description="Sessions open now.")
        meter.create_observable_counter("mcpbench.spans.exported", [lambda options: [Observation(counts()[0])]], unit="{span}",
                                        description="Spans the OTLP endpoint took.")
        meter.create_observable_counter("mcpbench.spans.dropped", [lambda options: [Observation(counts()[1])]], unit="{span}",
                                        description="Spans not sent: the queue was full or the endpoint failed.")
        self._tools = otel.Folder()
        self._prompts = otel.Folder()
        self._errors = otel.Folder()
        self._codes = otel.Folder()

    def take(self, finished: Iterable[TracedCall | SessionDone | TracedProblem]) -> None:
        for item in finished:
            if type(item) is TracedCall:
                self._call(item)
            elif type(item) is SessionDone:
                self._session(item)
            else:
                self._problem(item)

    def _call(self, call: TracedCall) -> None:
        state = call.session
        labels: dict[str, Any] = {
            otel.METHOD: call.method,
            otel.NETWORK_TRANSPORT: otel.network_transport(state.transport),
            otel.TRANSPORT: state.transport,
            otel.OUTCOME: call.outcome,
        }
        attributes = call.attributes
        if otel.TOOL in attributes:
            labels[otel.TOOL] = self._tools(attributes[otel.TOOL])
        elif otel.PROMPT in attributes:
            labels[otel.PROMPT] = self._prompts(attributes[otel.PROMPT])
        if state.version:
            labels[otel.PROTOCOL_VERSION] = state.version
        if state.era:
            labels[otel.ERA] = state.era
        if call.error_type is not None:
            labels[otel.ERROR_TYPE] = self._errors(call.error_type)
            self.errors.add(1, {otel.ERROR_CLASS: labels[otel.ERROR_TYPE], otel.TRANSPORT: state.transport})
        seconds = (call.end or call.start) - call.start
        (self.client_duration if call.direction == "c2s" else self.server_duration).record(seconds, labels)
        self.calls.add(1, labels)

    def _session(self, done: SessionDone) -> None:
        state = done.session
        labels: dict[str, Any] = {otel.NETWORK_TRANSPORT: otel.network_transport(state.transport), otel.TRANSPORT: state.transport}
        if state.version:
            labels[otel.PROTOCOL_VERSION] = state.version
        if state.era:
            labels[otel.ERA] = state.era
        if done.error_type is not None:
            labels[otel.ERROR_TYPE] = done.error_type
        self.session_duration.record(max(0.0, done.end - state.start), labels)

    def _problem(self, problem: TracedProblem) -> None:
        transport = problem.session.transport
        if problem.kind == "violation":
            self.violations.add(1, {otel.VIOLATION_CODE: self._codes(problem.name), otel.TRANSPORT: transport})
        else:
            self.errors.add(1, {otel.ERROR_CLASS: self._errors(problem.name), otel.TRANSPORT: transport})

    def close(self) -> None:
        """Push the last figures (OTLP) and stop serving."""
        self.provider.shutdown(timeout_millis=SHUTDOWN_MS)
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
