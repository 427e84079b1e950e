"""A load run's samples (`samples.jsonl`) → spans over OTLP: `mcpbench load --otlp`, `export --load-samples`.

A sample is a step the load's client timed, not a trace event, so no session is rebuilt here: each
sample is one CLIENT span named as the conventions say (`tools/call echo`, `resources/read` with
`mcp.resource.uri`), from its start for its latency, with `error.type` the failure class
(`session-not-found`, `http-5xx`, …) and the detail as the status message. The samples of one
client session (the load's `session` tag) share a trace under an `mcp.session` span from its
first step's start to its last one's end, sent once the file is read. `server.address` comes
from the run's `scenario.json` beside the samples. Reconnect and open-model lines are no steps:
skipped.
"""

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode

from mcpbench.companions.options import TelemetryOptions
from mcpbench.load.samples import records
from mcpbench.protocol.versions import NAMED_METHODS
from mcpbench.telemetry import conventions as otel
from mcpbench.telemetry.otlp import SpanShipper
from mcpbench.telemetry.spans import NS, SAMPLED, SCOPE, resource


@dataclass(slots=True)
class _SessionSpan:
    trace_id: int
    span_id: int
    start: float
    end: float
    steps: int = 0
    failed: int = 0


def _target(samples: Path) -> str | None:
    """The run's target, from the scenario.json the runner writes beside its samples."""
    try:
        target = orjson.loads((samples.parent / "scenario.json").read_bytes()).get("target")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    return target if isinstance(target, str) else None


def step_attributes(step: str) -> tuple[str, dict[str, Any]]:
    """A sample's step (`tools/call echo`) as a span name and the method's attributes."""
    method, _, target = step.partition(" ")
    key = NAMED_METHODS.get(method)
    return otel.request_attributes(method, {key: target} if key and target else None)


class SampleSpans:
    """Spans of one run's samples, as they are read; `close` gives the session spans."""

    def __init__(self, options: TelemetryOptions, target: str | None) -> None:
        self.resource = resource(options.service_name)
        self.server = otel.server_endpoint(target) if target and not target.startswith("stdio:") else {}
        self.sessions: dict[str, _SessionSpan] = {}
        self._random = random.Random()

    def _id(self, bits: int) -> int:
        return self._random.getrandbits(bits) or 1

    def span(self, sample: dict[str, Any]) -> ReadableSpan | None:
        step, start = sample.get("step"), sample.get("t")
        if not isinstance(step, str) or not isinstance(start, (int, float)):
            return None  # a reconnect or open-model line
        end = start + max(float(sample.get("latency_ms") or 0), 0.0) / 1000
        transport, _, era = str(sample.get("type") or "").partition(" ")  # `<transport> <era>` when a scenario lists several
        name, attributes = step_attributes(step)
        attributes |= {otel.NETWORK_TRANSPORT: otel.network_transport(transport), otel.TRANSPORT: transport, **self.server}
        if era:
            attributes[otel.ERA] = era
        failure = sample.get("failure")
        attributes[otel.OUTCOME] = "error" if failure else "ok"
        status = Status(StatusCode.UNSET)
        if failure:
            attributes[otel.ERROR_TYPE] = failure
            status = Status(StatusCode.ERROR, sample.get("detail") or failure)
        parent = None
        if (tag := sample.get("session")) is not None:
            tag = str(tag)
            attributes[otel.SESSION_KEY] = tag
            session = self.sessions.get(tag)
            if session is None:
                session = self.sessions[tag] = _SessionSpan(self._id(128), self._id(64), start, end)
            session.start, session.end = min(session.start, start), max(session.end, end)
            session.steps += 1
            session.failed += bool(failure)
            parent = SpanContext(session.trace_id, session.span_id, is_remote=False, trace_flags=SAMPLED)
        return ReadableSpan(
            name=name,
            context=SpanContext(parent.trace_id if parent else self._id(128), self._id(64), is_remote=False, trace_flags=SAMPLED),
            parent=parent, resource=self.resource, attributes=attributes, kind=SpanKind.CLIENT, status=status,
            start_time=int(start * NS), end_time=int(end * NS), instrumentation_scope=SCOPE,
        )

    def close(self) -> list[ReadableSpan]:
        spans = []
        for tag, session in self.sessions.items():
            spans.append(ReadableSpan(
                name=otel.SESSION_SPAN,
                context=SpanContext(session.trace_id, session.span_id, is_remote=False, trace_flags=SAMPLED),
                parent=None, resource=self.resource, kind=SpanKind.INTERNAL,
                attributes={otel.SESSION_KEY: tag, "mcpbench.requests": session.steps, "mcpbench.failed": session.failed, **self.server},
                start_time=int(session.start * NS), end_time=int(session.end * NS), instrumentation_scope=SCOPE,
            ))
        self.sessions.clear()
        return spans


def export_samples(paths: list[str], options: TelemetryOptions) -> list[str]:
    """Send the spans of load runs' samples (offline: waiting for the endpoint); the lines to say.

    Raises:
        OSError: a samples file cannot be read.
        TargetError: the endpoint did not take a batch.
    """
    lines = []
    for path in paths:
        started = time.monotonic()
        maker = SampleSpans(options, _target(Path(path)))
        shipper = SpanShipper(options.otlp, live=False)
        steps = 0
        try:
            for sample in records(path):
                if (span := maker.span(sample)) is not None:
                    steps += 1
                    shipper.add(span)
            sessions = maker.close()
            for span in sessions:
                shipper.add(span)
        finally:
            shipper.close()
        lines.append(f"mcpbench: OTLP: {shipper.exported} spans sent to {shipper.url} ({steps} steps, {len(sessions)} sessions) "
                     f"from {path} in {time.monotonic() - started:.1f} s")
    return lines
