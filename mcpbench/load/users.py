"""Locust users that speak MCP themselves (the official SDK is asyncio and cannot run in a gevent user).

Three layers, as in Locust's own custom-client example:

1. `McpClient` (client.py) knows the protocol core and a `request_event`;
2. `McpUser` here, abstract, builds one client per user and runs the session mode;
3. `StdioUser`, `SseUser`, `StreamableHttpUser` (abstract too) pick the transport; write
   your own concrete user with `@task`s, or let the generic locustfile build one from a scenario::

       from locust import task
       from mcpbench.load import StreamableHttpUser

       class Echo(StreamableHttpUser):
           host = "http://127.0.0.1:8000/mcp"
           @task
           def echo(self):
               self.mcp.call_tool("echo", {"text": "hi"})

Importing this module imports Locust (which monkey-patches the process with gevent).
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import gevent
from locust import User, task
from locust.contrib.fasthttp import FastHttpUser
from locust.exception import StopTest, StopUser

from mcpbench.auth.oauth import TokenSource
from mcpbench.auth.options import ClientAccess
from mcpbench.load.client import McpClient
from mcpbench.load.openmodel import ArrivalSchedule
from mcpbench.load.templates import Workload
from mcpbench.load.traceload import SessionQueue
from mcpbench.transport.base import Transport
from mcpbench.transport.green import transport_for
from mcpbench.protocol.asks import Canned
from mcpbench.protocol.operation import MAX_ROUNDS, TASK_CAPABILITIES
from mcpbench.protocol.reconnect import ReconnectPolicy
from mcpbench.protocol.http import Failure
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.protocol.versions import INPUT_METHODS, LATEST_HANDSHAKE, has_handshake, has_input_required
from mcpbench.system.target import Target, parse_target

LONG_LIVED = "long_lived"
SESSION_PER_TASK = "session_per_task"
# After a connect failure (server down, command missing) a user waits this long before trying
# again, so a dead target costs failures, not a spinning CPU.
RECONNECT_BACKOFF = 0.2
# Distinct loopback source addresses: 127.0.0.2 … 127.0.0.254, then again (users of one process).
FIRST_SOURCE, SOURCES = 2, 253
_source_numbers = itertools.count()


class McpUser(User):
    """Base of the MCP users: one `McpClient` in `self.mcp`, session handling per `session_mode`."""

    abstract = True

    transport_name: ClassVar[str] = ""
    """Set by the transport subclasses; the default `request_type`."""

    session_mode: str = LONG_LIVED
    """`long_lived`: one session per user, re-initialised when it is lost (404, stream closed).
    `session_per_task`: the scenario task runs handshake, calls and close each time."""

    version: str = LATEST_HANDSHAKE
    """Protocol version: a handshake-era version (2025-11-25 …) or 2026-07-28 (no handshake, `_meta` envelope)."""

    timeout: float = 30.0
    """Seconds one step may take before it fails as answer-lost/timeout."""

    request_type: str | None = None
    """`request_type` in Locust's statistics; the transport name when None."""

    discover: bool = False
    """2026-07-28 only: start each session with `server/discover`."""

    distinct_sources: bool = False
    """HTTP on loopback: this user's sockets bind their own 127.0.0.N (`source_address`), so that a
    balancer with client address affinity tells the users apart."""

    source_address: str | None = None
    """The local address this user's sockets bind; set per user when `distinct_sources`."""

    server_requests: dict[str, dict | None] = {}
    """How server→client requests are answered: method -> canned result (None: refused); the rest refused."""

    input_responses: dict[str, dict] = {}
    """The answers a user gives to the input a server asks for (2026-07-28's input rounds; in the
    handshake era its server requests too): request method -> result."""

    answer_think: tuple[float, float] = (0.0, 0.0)
    """(least, most) seconds a user thinks before each answer to input it is asked for."""

    max_rounds: int = MAX_ROUNDS
    """Input rounds an operation answers before it fails as input-rounds-exceeded."""

    listen_for: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    """2026-07-28: (types, resource URIs) each session's `subscriptions/listen` stream asks for; None: none."""

    declare_tasks: bool = False
    """2026-07-28: declare the tasks extension (the server may then answer any call with a task)."""

    reconnect: ReconnectPolicy | None = None
    """What a call does when its session or stream breaks (`protocol.reconnect`); None: nothing in the call."""

    get_stream: bool = False
    """Streamable HTTP, handshake era: hold each session's `GET` stream open (for what the server
    sends outside requests), reopened when it ends while the session stands."""

    reconnect_sink: ClassVar[Callable[[dict], None] | None] = None
    """Where the reconnect records go (the generic locustfile sets its sample writer's)."""

    access: ClientAccess | None = None
    """The headers every request carries, OAuth's settings and the proxies (`mcpbench.auth`); None:
    no headers, and the environment's proxies. With OAuth each user has its own token, unless
    `oauth.shared`: one for every user of this process. Discovery and token requests are steps
    of request type "oauth"."""

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        if self.distinct_sources and self.source_address is None:
            self.source_address = f"127.0.0.{FIRST_SOURCE + next(_source_numbers) % SOURCES}"
        if self.access is None:
            type(self).access = ClientAccess.none()
        tokens = self._tokens()
        self.mcp = McpClient(
            self.make_transport,
            environment.events.request,
            request_type=self.request_type or self.transport_name,
            version=self.version,
            timeout=self.timeout,
            discover=self.discover,
            policy=Canned({**self.server_requests, **self.input_responses}),
            capabilities=TASK_CAPABILITIES if self.declare_tasks and not has_handshake(self.version) else None,
            max_rounds=self.max_rounds,
            answer_think=self.answer_think,
            listen_for=self.listen_for,
            reconnect=self.reconnect,
            on_reconnect=McpUser.reconnect_sink,
            headers=self.access.headers,
            tokens=tokens,
            get_stream=self.get_stream,
        )
        if tokens is not None and tokens.on_request is _unreported:
            tokens.on_request = self.mcp.oauth_sample  # a shared source: the first user's events are everyone's

    def _tokens(self) -> TokenSource | None:
        access = self.access
        if access.oauth is None:
            return None
        if not access.oauth.shared:
            source = access.token_source(_unreported)
        else:
            source = _shared_tokens.get(id(access))
            if source is None:
                source = _shared_tokens[id(access)] = access.token_source(_unreported)
        return source

    def make_transport(self) -> Transport:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_start(self) -> None:
        if self.session_mode == LONG_LIVED:
            self._ensure()

    def on_stop(self) -> None:
        try:
            if self.mcp.ready and self.session_mode == LONG_LIVED:
                self.mcp.end_session()
        finally:
            self.mcp.close_transport()

    def _ensure(self) -> bool:
        if self.mcp.dead is not None:
            return True  # reconnect policy `none`: the calls go on, and fail
        if self.mcp.ensure_session():
            return True
        gevent.sleep(RECONNECT_BACKOFF)
        return False

    # Convenience for hand-written tasks: in long_lived mode they (re)start the session first.
    def call(self, method: str, params: dict | None = None, **kw: Any) -> Any:
        if self.session_mode == LONG_LIVED and not self.mcp.ready and not self._ensure():
            return None
        return self.mcp.call(method, params, **kw)

    def call_tool(self, tool: str, arguments: dict | None = None, **kw: Any) -> Any:
        return self.call("tools/call", {"name": tool, "arguments": arguments or {}}, **kw)

    def operation(self, method: str, params: dict | None = None, **kw: Any) -> Any:
        """One request followed to its end, one step (`McpClient.operation`: its input rounds, its task)."""
        if self.session_mode == LONG_LIVED and not self.mcp.ready and not self._ensure():
            return None
        return self.mcp.operation(method, params, **kw)


class StreamableHttpUser(FastHttpUser, McpUser):
    """MCP over Streamable HTTP on Locust's fast HTTP client (geventhttpclient), SSE answers read incrementally.

    `host` is the MCP endpoint URL (`http://host:port/mcp`). FastHttpUser's settings
    (`network_timeout`, `connection_timeout`, `insecure`, `ssl_context_factory`, …) apply.
    """

    abstract = True
    transport_name = STREAMABLE_HTTP

    network_timeout: float = 30.0
    """Socket timeout of FastHttpUser's client; keep it >= `timeout`."""
    connection_timeout: float = 30.0

    def make_transport(self) -> Transport:
        return transport_for(Target(STREAMABLE_HTTP, url=_url(self.host, STREAMABLE_HTTP)), timeout=self.timeout,
                             pool=self.client.client.clientpool, source=self.source_address, proxies=self.access.proxies)


class SseUser(McpUser):
    """MCP over legacy HTTP+SSE: a `GET` stream read by one greenlet per user, POST answers matched by id.

    `host` is the stream URL (`http://host:port/sse` or `sse+http://…`).
    """

    abstract = True
    transport_name = LEGACY_SSE

    def make_transport(self) -> Transport:
        return transport_for(Target(LEGACY_SSE, url=_url(self.host, LEGACY_SSE)), timeout=self.timeout, source=self.source_address,
                             proxies=self.access.proxies)


class StdioUser(McpUser):
    """MCP over stdio: one child process per user (gevent.subprocess).

    `command` (argv list) or `host` = `stdio:CMD ARGS`. In `session_per_task` mode every task
    starts a new process, since a stdio session lasts as long as its process.
    """

    abstract = True
    transport_name = STDIO
    command: list[str] | None = None
    """The server's argv; when None, taken from `host` (`stdio:python server.py`)."""
    env: dict[str, str] | None = None
    """Environment of the server process (None: inherit)."""
    cwd: str | None = None

    def make_transport(self) -> Transport:
        argv = self.command
        if not argv:
            if not self.host:
                raise StopTest("StdioUser needs `command` or a host like stdio:python server.py")
            argv = list(parse_target(self.host).argv)
        return transport_for(Target(STDIO, argv=tuple(argv)), timeout=self.timeout, env=self.env, cwd=self.cwd)


def _url(host: str | None, transport: str) -> str:
    if not host:
        raise StopTest(f"{transport} user needs a host (the MCP URL), in the class or with --host")
    if "://" not in host:
        raise StopTest(f"{transport} user: host {host!r} is not a URL")
    target = parse_target(host)
    if target.transport not in (transport, STREAMABLE_HTTP):
        raise StopTest(f"{transport} user: host {host!r} is a {target.transport} target")
    return target.url


# --- users built from a scenario ----------------------------------------------------------------


class ScenarioMixin:
    """The task a scenario describes; mixed into one of the transport users by `build_user_class`."""

    workload: ClassVar[Workload]
    calls_per_session: ClassVar[int] = 5
    think_time: ClassVar[tuple[float, float]] = (0.0, 0.0)
    schedule: ClassVar[ArrivalSchedule | None] = None
    max_sessions: ClassVar[int | None] = None
    """session_per_task: sessions this process runs in all; then the users stop and the run ends."""
    max_calls: ClassVar[int | None] = None
    """long_lived: calls this process makes in all; then the users stop and the run ends."""
    replay: ClassVar[SessionQueue | None] = None
    """Recorded traffic as load (traceload.py): each task runs the next recorded session on its schedule."""

    @contextmanager
    def _claimed(self, limit: int | None) -> Iterator[None]:
        """Run a new session (`max_sessions`) or call (`max_calls`), counted; once `limit` have started,
        stop this user instead (the last user to find every one ended ends the run).

        Raises:
            StopUser: none is left to start.
        """
        if limit is not None and _quota.started >= limit:
            if _quota.running == 0 and not _quota.ending:
                _quota.ending = True
                gevent.spawn(self.environment.runner.quit)  # every one has ended: so does the run
            raise StopUser()
        _quota.started += 1
        _quota.running += 1
        try:
            yield
        finally:
            _quota.running -= 1

    def _think(self) -> None:
        low, high = self.think_time
        if high > 0:
            gevent.sleep(low if low == high else random.uniform(low, high))

    def _one_call(self, intended_start: float | None = None) -> None:
        call, params = self.workload.next()
        if call.as_task or (call.method in INPUT_METHODS and has_input_required(self.version)):
            # A step is the whole operation: its input rounds, its task, from the first request to the end.
            self.mcp.operation(call.method, params, name=call.step, intended_start=intended_start, as_task=call.as_task)
        else:
            self.mcp.call(call.method, params, name=call.step, intended_start=intended_start)

    @task
    def scenario_task(self) -> None:
        if self.replay is not None:
            self._recorded_session()
        elif self.schedule is not None:
            self._open_model_task()
        elif self.session_mode == SESSION_PER_TASK:
            with self._claimed(self.max_sessions):
                self._session_task()
            self._think()
        else:
            if self._ensure():
                with self._claimed(self.max_calls):
                    self._one_call()
            self._think()

    def _session_task(self) -> None:
        with self.mcp.session() as ok:
            if ok:
                for index in range(self.calls_per_session):
                    if index:
                        self._think()
                    if not self.mcp.ready:
                        break
                    self._one_call()
            else:
                gevent.sleep(RECONNECT_BACKOFF if self.mcp.transport is None else 0)

    def _recorded_session(self) -> None:
        """The next recorded session of this user's era, each call at its due time (latency from it).

        Raises:
            StopUser: no session of this era is left (the last one to end ends the run).
        """
        queue = self.replay
        session = queue.claim(self.version, time.perf_counter())
        if session is None:
            raise StopUser()
        timed = not math.isinf(queue.speed)  # `max`: no schedule, latency from the send
        try:
            _sleep_until(queue.due(session))
            with self.mcp.session() as ok:
                for call in session.calls if ok else ():
                    due = queue.due(session, call.at)
                    _sleep_until(due)
                    if not self.mcp.ready:
                        break
                    self.mcp.call(call.method, call.params, name=call.step, intended_start=due if timed else None)
        finally:
            if queue.done() and not queue.ended:
                queue.ended = True
                gevent.spawn(self.environment.runner.quit)  # every recorded session has run: so has the load

    def _open_model_task(self) -> None:
        slot = self.schedule.claim()
        _sleep_until(slot.intended)
        if not self.mcp.ready and not self._ensure():
            self.schedule.failed_start()
            return
        self.schedule.started(slot)
        self._one_call(intended_start=slot.intended)


def _sleep_until(when: float) -> None:
    delay = when - time.perf_counter()
    if delay > 0:
        gevent.sleep(delay)


def _unreported(name: str, seconds: float, error: Any) -> None:
    """A token source's `on_request` until its user's client is there to report."""


# Shared token sources (`oauth.shared`), one per access (one per user class's settings) in this process.
_shared_tokens: dict[int, TokenSource] = {}


class _Quota:
    """Sessions (`max_sessions`) or calls (`max_calls`) started and running in this process (users are greenlets of one thread)."""

    started = 0
    running = 0
    ending = False


_quota = _Quota()


TRANSPORT_USERS = {STDIO: StdioUser, LEGACY_SSE: SseUser, STREAMABLE_HTTP: StreamableHttpUser}


def build_user_class(scenario: Any, version: str, *, label: str | None = None, weight: int = 1, schedule: ArrivalSchedule | None = None,
                     access: ClientAccess | None = None, replay: SessionQueue | None = None) -> type:
    """A concrete Locust user class running `scenario` at protocol `version` (with `access`'s headers, tokens, proxies)."""
    target = parse_target(scenario.target)
    base = TRANSPORT_USERS[target.transport]
    low, high = scenario.think_time
    attrs: dict[str, Any] = {
        "abstract": False,
        "host": scenario.target if target.transport != LEGACY_SSE else target.url,
        "weight": weight,
        "session_mode": scenario.session,
        "version": version,
        "timeout": scenario.timeout,
        "request_type": label,
        "discover": False,
        "distinct_sources": scenario.distinct_sources,
        "server_requests": scenario.server_requests,
        "input_responses": scenario.input_responses,
        "answer_think": scenario.answer_think,
        "max_rounds": scenario.max_rounds,
        "declare_tasks": any(call.as_task for call in scenario.mix),
        "listen_for": scenario.listen,
        "reconnect": scenario.reconnect,
        "access": access,
        "max_sessions": scenario.sessions,
        "max_calls": scenario.calls,
        "workload": Workload(scenario.mix),
        "calls_per_session": scenario.calls_per_session,
        "think_time": (low, high),
        "schedule": schedule,
        "replay": replay,
        "wait_time": lambda self: 0,
        # Locust collects @task methods of User classes only; the mixin's task is named here.
        "tasks": [ScenarioMixin.scenario_task],
    }
    if target.transport == STDIO:
        attrs["command"] = list(target.argv)
    if replay is not None:  # a user per recorded session of this era (at most traceload.MAX_USERS)
        attrs["fixed_count"] = replay.users(version)
    name = f"{base.__name__.replace('User', '')}Scenario{version.replace('-', '')}User"
    return type(name, (ScenarioMixin, base), attrs)


__all__ = ["McpUser", "SseUser", "StdioUser", "StreamableHttpUser", "build_user_class", "Failure"]
