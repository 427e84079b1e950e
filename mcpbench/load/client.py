"""The load users' MCP client: the protocol core plus a `request_event`, nothing else.

`McpClient` builds every message with `ClientProtocol`, moves bytes through a
`Transport` and reports each step exactly once through `request_event.fire(...)`
(Locust's `events.request`, or any object with a `fire(**kw)` method)::

    request_type  the transport ("stdio", "sse", "streamable-http"), or a label set by the user
    name          the step: connect, initialize, notifications/initialized, tools/list,
                  tools/call <tool>, resources/read, prompts/get, ping, DELETE, …
    response_time ms from the intended start (open model) or the send, to the final answer
    exception     McpFailure(kind) when the step failed, else None
    context       {"failure": kind, "ttfe": ms to the first SSE event, "uncorrected": ms, "late": bool,
                   "session": the client session's tag, "instance": the server instance a lab balancer named}

It never imports Locust; gevent only through the transport.
"""

from __future__ import annotations

import itertools
import os
import time
from contextlib import contextmanager
from typing import Any

import gevent

from mcpbench.load.transports import CallTimeout, McpFailure, Reply, Transport
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.client import ClientProtocol
from mcpbench.protocol.http import SESSION_ID, Failure, post_headers
from mcpbench.protocol.jsonrpc import ErrorResponse, Request
from mcpbench.protocol.versions import LATEST_HANDSHAKE, NAMED_METHODS

# Tags every session of this process apart in the samples ("<pid>-<n>"), so a run's steps can be
# grouped by session (the lab's sticky-session analysis).
_SESSION_TAGS = itertools.count(1)

STEP_CONNECT = "connect"
STEP_DELETE = "DELETE"


def step_name(method: str, params: dict | None) -> str:
    """Low-cardinality step name: the method, plus the tool for tools/call."""
    if method == "tools/call" and params:
        return f"tools/call {params.get('name')}"
    return method


class McpClient:
    """One user's MCP sessions over one transport kind.

    Args:
        make_transport: builds a fresh, unopened `Transport` (called for every new connection).
        request_event: where steps are reported (`fire(**kw)`).
        request_type: the `request_type` of every report (usually the transport name).
        version: protocol version; 2026-07-28 means no handshake and a `_meta` envelope.
        timeout: seconds a step may take before it fails as answer-lost/timeout.
    """

    def __init__(
        self,
        make_transport,
        request_event: Any,
        *,
        request_type: str,
        version: str = LATEST_HANDSHAKE,
        timeout: float = 30.0,
        discover: bool = False,
    ) -> None:
        self._make_transport = make_transport
        self.request_event = request_event
        self.request_type = request_type
        self.version = version
        self.timeout = timeout
        self.discover = discover
        self.protocol = ClientProtocol(version)
        self.stateless = self.protocol.stateless
        self.transport: Transport | None = None
        self.session_id: str | None = None
        self.ready = False  # a session is set up and usable
        self.session_tag: str | None = None
        self._headers: dict[tuple[str, str | None], dict[str, str]] = {}

    # --- reporting ----------------------------------------------------------------------------

    def _record(self, name: str, start: float, size: int, failure: McpFailure | None, context: dict | None = None) -> None:
        """Fire the request event once for one step (ms from `start`, a perf_counter time)."""
        now = time.perf_counter()
        ctx = context if context is not None else {}
        if failure is not None:
            ctx["failure"] = failure.kind
        if self.session_tag is not None:
            ctx["session"] = self.session_tag
        if self.transport is not None and self.transport.instance is not None:
            ctx["instance"], self.transport.instance = self.transport.instance, None
        self.request_event.fire(
            request_type=self.request_type,
            name=name,
            response_time=(now - start) * 1000.0,
            response_length=size,
            exception=failure,
            context=ctx,
            start_time=time.time() - (now - start),
        )

    # --- connection and session ---------------------------------------------------------------

    def connect(self) -> bool:
        """Open a fresh transport. Reports `connect` for transports with a connect step (legacy SSE).

        Returns:
            whether the transport is open.
        """
        self.close_transport()
        self.transport = self._make_transport()
        start = time.perf_counter()
        try:
            with gevent.Timeout(self.timeout + 1.0, CallTimeout):
                self.transport.open()
        except McpFailure as exc:
            self._report_connect(start, exc)
            self.close_transport()
            return False
        except CallTimeout:
            self._report_connect(start, McpFailure(Failure.ANSWER_LOST, "connect timed out"))
            self.close_transport()
            return False
        self._report_connect(start, None)
        return True

    def _report_connect(self, start: float, failure: McpFailure | None) -> None:
        # Only legacy SSE has a protocol step here (GET → endpoint event). Others report failures
        # (a stdio command that cannot start), so that they are seen.
        if self.transport is not None and (self.transport.name == "sse" or failure is not None):
            self._record(STEP_CONNECT, start, 0, failure)

    def start_session(self) -> bool:
        """Connect if needed and run the handshake (handshake era) or server/discover (2026-07-28, if asked).

        Returns:
            whether the session is usable.
        """
        self.ready = False
        self.session_tag = f"{os.getpid()}-{next(_SESSION_TAGS)}"
        if self.transport is None or not self.transport.alive:
            if not self.connect():
                return False
        self.protocol = ClientProtocol(self.version)
        self.session_id = None
        self._headers.clear()
        if self.stateless:
            if self.discover and self.call("server/discover") is None:
                return False
            self.ready = True
            return True
        if self._exchange("initialize", self.protocol.initialize()) is None:
            return False
        if not self._notify("notifications/initialized", self.protocol.initialized()):
            return False
        self.ready = True
        return True

    def end_session(self) -> None:
        """End the session: DELETE on Streamable HTTP (handshake era), close the transport otherwise."""
        self.ready = False
        transport = self.transport
        if transport is not None and transport.has_session_header:
            if self.session_id is not None:
                start = time.perf_counter()
                headers = {SESSION_ID: self.session_id}
                if self.protocol.session.version:
                    headers["mcp-protocol-version"] = self.protocol.session.version
                failure = None
                size = 0
                try:
                    with gevent.Timeout(self.timeout, CallTimeout):
                        size = transport.end_session(headers) or 0
                except McpFailure as exc:
                    failure = exc
                except CallTimeout:
                    failure = McpFailure(Failure.ANSWER_LOST, "no answer to DELETE")
                self._record(STEP_DELETE, start, size, failure)
            self.session_id = None
            self.protocol.session.close()
        else:
            self.close_transport()

    def close_transport(self) -> None:
        self.ready = False
        if self.transport is not None:
            transport, self.transport = self.transport, None
            transport.close()

    @contextmanager
    def session(self):
        """`with client.session(): …` — handshake on entry, close or DELETE on exit.

        Yields whether the handshake succeeded (calls inside still report, and fail, if it did not).
        """
        ok = self.start_session()
        try:
            yield ok
        finally:
            self.end_session()

    def ensure_session(self) -> bool:
        """Long-lived mode: (re)establish the session if it is gone."""
        if self.ready and self.transport is not None and self.transport.alive:
            return True
        return self.start_session()

    # --- calls --------------------------------------------------------------------------------

    def call(self, method: str, params: dict | None = None, *, name: str | None = None, intended_start: float | None = None) -> Any:
        """Send one request and wait for its answer; report it as one step.

        Returns:
            the result, or None when the step failed (the failure is reported, not raised).
        """
        return self._exchange(name or step_name(method, params), self.protocol.request(method, params), intended_start)

    def call_tool(self, tool: str, arguments: dict | None = None, **kw: Any) -> Any:
        return self.call("tools/call", {"name": tool, "arguments": arguments or {}}, **kw)

    def list_tools(self, **kw: Any) -> Any:
        return self.call("tools/list", **kw)

    def read_resource(self, uri: str, **kw: Any) -> Any:
        return self.call("resources/read", {"uri": uri}, **kw)

    def get_prompt(self, prompt: str, arguments: dict | None = None, **kw: Any) -> Any:
        params: dict = {"name": prompt}
        if arguments:
            params["arguments"] = arguments
        return self.call("prompts/get", params, **kw)

    def ping(self, **kw: Any) -> Any:
        return self.call("ping", **kw)

    def _http_headers(self, message: Any) -> dict[str, str] | None:
        transport = self.transport
        if transport is None or not transport.has_session_header:
            return None
        method = message.method
        key = NAMED_METHODS.get(method)
        target = message.params.get(key) if key and message.params else None
        cache_key = (method, target if isinstance(target, str) else None)
        headers = self._headers.get(cache_key)
        if headers is None:
            version = self.version if self.stateless else (self.protocol.session.version if method != "initialize" else None)
            headers = post_headers(message, version=version, session_id=self.session_id)
            if method != "initialize":  # the session id and version are known from here on
                self._headers[cache_key] = headers
        return headers

    def _exchange(self, name: str, request: Request, intended_start: float | None = None) -> Any:
        transport = self.transport
        sent = time.perf_counter()
        start = intended_start if intended_start is not None else sent
        context: dict = {}
        if transport is None:
            self._record(name, start, 0, McpFailure(Failure.STREAM_CLOSED, "not connected"), context)
            return None
        data, _ = self.protocol.send(request, sent)
        try:
            with gevent.Timeout(self.timeout, CallTimeout):
                reply: Reply = transport.request(request, data, self._http_headers(request))
        except McpFailure as exc:
            self._fail(exc)
            self._record(name, start, 0, exc, self._timing(context, sent, intended_start, None))
            return None
        except CallTimeout:
            exc = McpFailure(Failure.ANSWER_LOST, f"no answer within {self.timeout:g} s")
            self._fail(exc)
            self._record(name, start, 0, exc, self._timing(context, sent, intended_start, None))
            return None
        answer = reply.answer
        self.protocol.receive(answer)
        if request.method == "initialize" and reply.session_id:
            self.session_id = reply.session_id
        failure = None
        result = None
        if isinstance(answer, ErrorResponse):
            failure = McpFailure(Failure.JSONRPC_ERROR, f"code {answer.code}")
        else:
            result = answer.result
            if isinstance(result, dict) and result.get("isError") is True:
                failure = McpFailure(Failure.TOOL_ERROR, "isError")
        self._record(name, start, reply.size + len(data), failure, self._timing(context, sent, intended_start, reply.first_event))
        return result if failure is None else None

    @staticmethod
    def _timing(context: dict, sent: float, intended: float | None, first_event: float | None) -> dict:
        if first_event is not None:
            context["ttfe"] = (first_event - sent) * 1000.0
        if intended is not None:
            now = time.perf_counter()
            context["uncorrected"] = (now - sent) * 1000.0
        return context

    def _notify(self, name: str, message: Any) -> bool:
        transport = self.transport
        start = time.perf_counter()
        if transport is None:
            self._record(name, start, 0, McpFailure(Failure.STREAM_CLOSED, "not connected"))
            return False
        data, _ = self.protocol.send(message, start)
        try:
            with gevent.Timeout(self.timeout, CallTimeout):
                size = transport.notify(data, self._http_headers(message))
        except McpFailure as exc:
            self._fail(exc)
            self._record(name, start, 0, exc)
            return False
        except CallTimeout:
            exc = McpFailure(Failure.ANSWER_LOST, f"no answer within {self.timeout:g} s")
            self._fail(exc)
            self._record(name, start, 0, exc)
            return False
        self._record(name, start, size + len(data), None)
        return True

    def _fail(self, exc: McpFailure) -> None:
        """What a failure means for the session: after these, a long-lived user starts a new one."""
        if exc.kind == Failure.SESSION_NOT_FOUND:
            # Streamable HTTP: "the client MUST start a new session by sending a new InitializeRequest".
            self.ready = False
            self.session_id = None
        elif exc.kind in (Failure.STREAM_CLOSED, Failure.CONNECT):
            self.ready = False
            if self.transport is not None and not self.transport.has_session_header:
                self.close_transport()


def encode_request(message: Any) -> bytes:
    """The bytes the client would send for `message` (for benchmarks comparing raw posts)."""
    return jsonrpc.encode(message)
