"""Finished calls and sessions → OpenTelemetry spans (the SDK's `ReadableSpan`, ready to export).

- A session is a span of its own (`mcp.session`, INTERNAL: the conventions define none), from its
  first event to its end, the root of its trace; its notifications (other than a call's),
  violations and errors are its events.
- A request with its answer is a span `{mcp.method.name} {target}`: CLIENT for the client's
  requests (the recording is the client's view: its timing is the client's), SERVER for the
  server's requests to the client (the client processes them, as the conventions say of an
  operation the server initiates). Its parent is the session's span; when the request carried
  `params._meta.traceparent`, that span is its parent instead (the trace goes on in the caller's
  trace) and the session's span is linked. Progress and cancellation are its events.
- Errors: `error.type` (the JSON-RPC code, `tool_error`, `unanswered`, `cancelled`) and status
  ERROR with the error's message.
"""

import random
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from mcpbench import __version__
from mcpbench.protocol.transports import STDIO
from mcpbench.telemetry import conventions as otel
from mcpbench.telemetry.calls import SessionDone, TracedCall, TrackedSession

SAMPLED = TraceFlags(TraceFlags.SAMPLED)
SCOPE = InstrumentationScope("mcpbench", __version__)
NS = 1_000_000_000


def resource(service_name: str) -> Resource:
    """The resource every span and metric carries: `service.name` (an option, `mcpbench` by
    default) and `service.version`; `OTEL_RESOURCE_ATTRIBUTES` adds more, as in any SDK."""
    return Resource.create({otel.SERVICE_NAME: service_name, "service.version": __version__})


def session_attributes(state: TrackedSession, header: dict[str, Any]) -> dict[str, Any]:
    """What every span of a session carries: transport, version, era, session id, server."""
    transport = state.transport
    attributes: dict[str, Any] = {otel.NETWORK_TRANSPORT: otel.network_transport(transport), otel.TRANSPORT: transport}
    if not state.sessionless:
        attributes[otel.SESSION_KEY] = state.key
    if transport != STDIO:
        attributes[otel.NETWORK_PROTOCOL] = "http"
        attributes.update(otel.server_endpoint(header.get("upstream") or header.get("target")))
        if not state.sessionless:
            attributes[otel.SESSION_ID] = state.key
    if state.version:
        attributes[otel.PROTOCOL_VERSION] = state.version
    if state.era:
        attributes[otel.ERA] = state.era
    return attributes


class SpanMaker:
    """Spans of one trace's calls and sessions, with their ids (a session's trace id is drawn once)."""

    def __init__(self, service: Resource, header: dict[str, Any] | None = None) -> None:
        self.resource = service
        self.header = header or {}
        self._random = random.Random()

    def _id(self, bits: int) -> int:
        return self._random.getrandbits(bits) or 1

    def _session_context(self, state: TrackedSession) -> SpanContext | None:
        if state.sessionless:
            return None
        if state.span_id is None:
            state.trace_id, state.span_id = self._id(128), self._id(64)
        return SpanContext(state.trace_id, state.span_id, is_remote=False, trace_flags=SAMPLED)

    def call(self, call: TracedCall) -> ReadableSpan:
        session = self._session_context(call.session)
        links: tuple[Link, ...] = ()
        if call.parent is not None:
            parent = SpanContext(call.parent.trace_id, call.parent.span_id, is_remote=True, trace_flags=TraceFlags(call.parent.flags))
            if session is not None:
                links = (Link(session),)
        else:
            parent = session
        trace_id = parent.trace_id if parent is not None else self._id(128)
        attributes = session_attributes(call.session, self.header) | call.attributes
        attributes[otel.OUTCOME] = call.outcome
        status = Status(StatusCode.UNSET)
        if call.error_type is not None:
            attributes[otel.ERROR_TYPE] = call.error_type
            status = Status(StatusCode.ERROR, call.error_message or call.error_type)
        return ReadableSpan(
            name=call.name,
            context=SpanContext(trace_id, self._id(64), is_remote=False, trace_flags=SAMPLED),
            parent=parent,
            resource=self.resource,
            attributes=attributes,
            events=[Event(name, fields, int(ts * NS)) for ts, name, fields in call.events],
            links=links,
            kind=SpanKind.CLIENT if call.direction == "c2s" else SpanKind.SERVER,
            status=status,
            start_time=int(call.start * NS),
            end_time=int((call.end if call.end is not None else call.start) * NS),
            instrumentation_scope=SCOPE,
        )

    def session(self, done: SessionDone) -> ReadableSpan:
        state = done.session
        context = self._session_context(state)
        attributes = session_attributes(state, self.header)
        attributes["mcpbench.requests"] = state.report.requests
        if state.dropped_events:
            attributes["mcpbench.events_dropped"] = state.dropped_events
        status = Status(StatusCode.UNSET)
        if done.error_type is not None:
            attributes[otel.ERROR_TYPE] = done.error_type
            ending = state.report.session.ending
            status = Status(StatusCode.ERROR, ending.detail if ending else done.error_type)
        return ReadableSpan(
            name=otel.SESSION_SPAN,
            context=context,
            parent=None,
            resource=self.resource,
            attributes=attributes,
            events=[Event(name, fields, int(ts * NS)) for ts, name, fields in state.events],
            kind=SpanKind.INTERNAL,
            status=status,
            start_time=int(state.start * NS),
            end_time=int(max(done.end, state.start) * NS),
            instrumentation_scope=SCOPE,
        )
