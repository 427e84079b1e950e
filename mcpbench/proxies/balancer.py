"""A mitmproxy addon that balances MCP traffic over server instances, with or without stickiness.

Load it in reverse mode (the reverse target only has to be a valid URL; every request is sent to
the instance the policy picks)::

    mitmdump --mode reverse:http://127.0.0.1:8001 -s mcpbench/proxies/balancer.py \\
        --set mcpbench_balancer_instances=127.0.0.1:8001,127.0.0.1:8002,127.0.0.1:8003 \\
        --set mcpbench_balancer_policy=sticky

or as its own process through mcpbench's mitmproxy host (`mcpbench.proxies.host`, without mitmdump's
idle addons), which is how `lab up` runs it (`lab/topology/cluster.py`)::

    python -m mcpbench.proxies.balancer --upstream http://127.0.0.1:8001 --listen 127.0.0.1:8000 \\
        --set mcpbench_balancer_instances=127.0.0.1:8001,127.0.0.1:8002 --set mcpbench_balancer_policy=sticky

Policies:

- `random`, `round-robin`: every request on its own, as HAProxy does in `mode http`;
- `sticky`: a request that names a session goes where that session was created. Streamable HTTP:
  the `Mcp-Session-Id` learned from the response that assigned it. Legacy HTTP+SSE: the session
  key of the POST URL (`legacy_session_key`), learned from the `endpoint` event of the `GET /sse`
  stream, which is streamed through unbuffered and read with the protocol core's `SseObserver`.
  Requests naming no known session fall back to round-robin;
- `source`: client address affinity (each new client address is assigned the next instance).
  On loopback, clients differ by binding 127.0.0.N before connecting;
- `session-hash`: a request naming a session goes to the instance its id hashes to, one naming
  none round-robin (HAProxy's `balance hdr(mcp-session-id)`). Common advice, and wrong for
  stateful servers: the id is minted after the routing decision, so a session stays on the
  instance that created it only when its id happens to hash there (about 1 in N).

Every response carries `X-Mcpbench-Instance: <name>` (names s1, s2, … unless given as
`name=host:port`), so clients can tell where each request of a session landed.

`Host` and `Origin` are checked as the official SDKs check them against DNS rebinding (the core's
`HostCheck`, which the mock uses too), before any routing: listening on a loopback address, a
foreign `Host` gets 421 and a foreign `Origin` 403 (any port of 127.0.0.1, localhost and [::1] is
allowed); `mcpbench_balancer_allowed_hosts` and `_allowed_origins` allow more (`name:*` any port,
`*` anything), and switch the check on for any other listen address. `mcpbench_balancer_foreign_host`
answers a foreign `Host` as fronts in the wild do instead: `page` (200 and a welcome page of its own,
as a web server's default site), `empty` (200, no body) or `close` (the connection closed, no answer);
none of them reaches an instance. The instances then get the
instance's address as `Host`, as a balancer in front of them sends it.

Stacking with the recorder (`mcpbench addon-path`): load the recorder first, then this addon; an
SSE stream callable set before this addon's `responseheaders` is wrapped, not replaced.
"""

# No `from __future__ import annotations`: mitmproxy loads this file as a script, and dataclasses
# of a module missing from sys.modules cannot resolve string annotations.
import itertools
import random
import sys
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from mcpbench.protocol.http import INSTANCE, SESSION_ID, is_event_stream, legacy_session_key
from mcpbench.protocol.observer import EndpointEvent, SseObserver
from mcpbench.protocol.server import HostCheck
from mcpbench.proxies.upstream import FreshUpstream

POLICIES: Final = ("random", "round-robin", "sticky", "source", "session-hash")
# How a foreign `Host` is answered: refused as the SDKs refuse it (421), or as other fronts answer it.
FOREIGN_HOST: Final = ("refuse", "page", "empty", "close")
WELCOME_PAGE: Final = b"<!DOCTYPE html>\n<html><head><title>Welcome</title></head><body><h1>It works!</h1></body></html>\n"
# Sessions (and client addresses) remembered at once, least recently used dropped first: as
# HAProxy's `stick-table … size 100k`, a bound against clients that never end their sessions.
MAX_ENTRIES: Final = 100_000
# The policies that route by the session a request names.
KEYED: Final = ("sticky", "session-hash")
# A legacy stream's `endpoint` event is its first; if it has not come within this many bytes the
# stream is passed on without further parsing (it is not an MCP legacy stream).
MAX_ENDPOINT_SEARCH: Final = 16 * 1024


class BalancerConfigError(ValueError):
    """An option value the balancer cannot use; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Instance:
    """One upstream server instance."""

    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def parse_instances(text: str) -> list[Instance]:
    """`[name=]host:port` or `[name=]http://host:port/…`, comma-separated; unnamed ones are s1, s2, ….

    Raises:
        BalancerConfigError: an entry that is not host:port, or a name given twice.
    """
    out: list[Instance] = []
    for index, entry in enumerate((e.strip() for e in text.split(",") if e.strip()), start=1):
        name, _, where = entry.rpartition("=")
        name = name.strip() or f"s{index}"
        parts = urlsplit(where if "://" in where else f"http://{where}")
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None:
            raise BalancerConfigError(f"instance {entry!r} is not host:port or http://host:port")
        out.append(Instance(name, parts.hostname, port))
    if len({i.name for i in out}) != len(out):
        raise BalancerConfigError(f"instance names given twice in {text!r}")
    return out


def request_session_key(session_header: str | None, path: str) -> str | None:
    """The session a request names: its `Mcp-Session-Id`, else the legacy key of its URL's query."""
    if session_header:
        return session_header
    if "?" in path:
        return legacy_session_key(path)
    return None


class Router:
    """Picks an instance per request by policy and remembers session and source affinity (no I/O).

    Args:
        instances: the upstreams, at least one.
        policy: one of `POLICIES`.
        rng: the random source of the `random` policy (seedable for tests).
    """

    def __init__(self, instances: Sequence[Instance], policy: str, rng: random.Random | None = None) -> None:
        if not instances:
            raise BalancerConfigError("no instances to balance over")
        if policy not in POLICIES:
            raise BalancerConfigError(f"unknown policy {policy!r} (one of {', '.join(POLICIES)})")
        self.instances = list(instances)
        self.policy = policy
        self._rng = rng or random.Random()
        self._next = itertools.cycle(self.instances)
        self._sessions: OrderedDict[str, Instance] = OrderedDict()
        self._sources: OrderedDict[str, Instance] = OrderedDict()

    def pick(self, session_key: str | None, source: str) -> Instance:
        """The instance for one request naming `session_key` (or None) from client address `source`."""
        if self.policy == "random":
            return self._rng.choice(self.instances)
        if self.policy == "sticky" and session_key is not None:
            instance = self._sessions.get(session_key)
            if instance is not None:
                self._sessions.move_to_end(session_key)
                return instance
        elif self.policy == "source":
            instance = self._sources.get(source)
            if instance is None:
                instance = self._remember(self._sources, source, next(self._next))
            return instance
        elif self.policy == "session-hash" and session_key is not None:
            # A stable hash (not Python's salted `hash`): the same id goes to the same instance in every run.
            return self.instances[zlib.crc32(session_key.encode("utf-8")) % len(self.instances)]
        return next(self._next)

    @property
    def learns(self) -> bool:
        """Whether responses must be watched for session ids (the sticky policy)."""
        return self.policy == "sticky"

    def learn(self, session_key: str, instance: Instance) -> None:
        """`session_key` was created on `instance`: send its requests there."""
        self._remember(self._sessions, session_key, instance)

    def forget(self, session_key: str) -> None:
        self._sessions.pop(session_key, None)

    @staticmethod
    def _remember(table: OrderedDict[str, Instance], key: str, instance: Instance) -> Instance:
        table[key] = instance
        table.move_to_end(key)
        if len(table) > MAX_ENTRIES:
            table.popitem(last=False)
        return instance


class EndpointLearner:
    """The stream callable of a legacy `GET /sse` response: chunks pass on unchanged, and the first
    `endpoint` event's session key is learned for the instance that serves the stream.

    Wraps a stream callable set before (the recorder's), so both see every chunk.
    """

    __slots__ = ("router", "instance", "inner", "observer", "seen", "done")

    def __init__(self, router: "Router", instance: Instance, inner: Callable[[bytes], bytes] | None) -> None:
        self.router = router
        self.instance = instance
        self.inner = inner
        self.observer = SseObserver()
        self.seen = 0
        self.done = False

    def __call__(self, chunk: bytes) -> bytes:
        if not self.done:
            self._look(chunk)
        return self.inner(chunk) if self.inner is not None else chunk

    def _look(self, chunk: bytes) -> None:
        self.seen += len(chunk)
        for event in self.observer.feed(chunk):
            if type(event) is EndpointEvent:
                self.router.learn(legacy_session_key(event.data), self.instance)
                self.done = True
                return
        if self.seen > MAX_ENDPOINT_SEARCH or not chunk:
            self.done = True


class Balancer:
    """The addon: options, routing in `request`, the instance header and learning in `responseheaders`."""

    def __init__(self) -> None:
        self.router: Router | None = None
        self.header = INSTANCE
        self.host_check = HostCheck()
        self.foreign_host = "refuse"
        self.upstream = FreshUpstream()  # no request on a dead or long-idle upstream connection

    def load(self, loader) -> None:
        loader.add_option(
            "mcpbench_balancer_instances", str, "",
            "mcpbench balancer: the instances, [name=]host:port, comma-separated (names default to s1, s2, …).",
        )
        loader.add_option(
            "mcpbench_balancer_policy", str, "round-robin",
            f"mcpbench balancer: {', '.join(POLICIES)}.",
        )
        loader.add_option(
            "mcpbench_balancer_seed", str, "",
            "mcpbench balancer: seed of the random policy (an integer; empty: unseeded).",
        )
        loader.add_option(
            "mcpbench_balancer_allowed_hosts", Sequence[str], [],
            "mcpbench balancer: also accept this Host (name:* for any port, * for any); on a loopback listen "
            "address the loopback names are accepted already. Repeatable.",
        )
        loader.add_option(
            "mcpbench_balancer_allowed_origins", Sequence[str], [],
            "mcpbench balancer: also accept this Origin (http://name:* for any port, * for any). Repeatable.",
        )
        loader.add_option(
            "mcpbench_balancer_foreign_host", str, "refuse",
            "mcpbench balancer: how a foreign Host is answered: refuse (421), page (200, a welcome page), "
            "empty (200, no body), close (no answer).",
        )

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx, exceptions

        from mcpbench.proxies.host import keep_client_host

        options = ctx.options
        keep_client_host(options)  # the check reads the client's Host; `request` sets the instance's
        # Every time: mitmproxy configures an addon only for the options changed after it was added.
        self.host_check = HostCheck.for_bind(options.listen_host, hosts=tuple(options.mcpbench_balancer_allowed_hosts),
                                             origins=tuple(options.mcpbench_balancer_allowed_origins))
        if options.mcpbench_balancer_foreign_host not in FOREIGN_HOST:
            raise exceptions.OptionsError(f"mcpbench_balancer_foreign_host: {options.mcpbench_balancer_foreign_host!r} "
                                          f"is not one of {', '.join(FOREIGN_HOST)}")
        self.foreign_host = options.mcpbench_balancer_foreign_host
        if not updated & {"mcpbench_balancer_instances", "mcpbench_balancer_policy", "mcpbench_balancer_seed"}:
            return
        if not options.mcpbench_balancer_instances:
            self.router = None  # not configured: requests go to the reverse target untouched
            return
        seed = options.mcpbench_balancer_seed.strip()
        try:
            rng = random.Random(int(seed)) if seed else None
        except ValueError:
            raise exceptions.OptionsError(f"mcpbench_balancer_seed: {seed!r} is not an integer") from None
        try:
            self.router = Router(parse_instances(options.mcpbench_balancer_instances), options.mcpbench_balancer_policy, rng)
        except BalancerConfigError as exc:
            raise exceptions.OptionsError(f"mcpbench balancer: {exc}") from None

    def request(self, flow) -> None:
        if flow.response is not None:
            return
        request = flow.request
        if self.host_check.enabled and (refused := self.host_check.refusal(request.headers)) is not None:
            from mitmproxy import http

            reply = refused.reply
            if reply.status == 421 and self.foreign_host == "close":
                flow.kill()  # the client's connection is closed, no answer sent
            elif reply.status == 421 and self.foreign_host != "refuse":
                page = WELCOME_PAGE if self.foreign_host == "page" else b""
                flow.response = http.Response.make(200, page, {"content-type": "text/html"} if page else {})
            else:
                flow.response = http.Response.make(reply.status, reply.body, dict(reply.headers))
            return
        router = self.router
        if router is None:
            self.upstream.before(flow)
            return
        key = request_session_key(request.headers.get(SESSION_ID), request.path) if router.policy in KEYED else None
        instance = router.pick(key, flow.client_conn.peername[0] if flow.client_conn.peername else "")
        request.host = instance.host
        request.port = instance.port
        request.host_header = instance.address
        flow.metadata["mcpbench_instance"] = instance
        self.upstream.before(flow)  # routed: the request goes upstream when this returns

    def responseheaders(self, flow) -> None:
        instance = flow.metadata.get("mcpbench_instance")
        if instance is None:
            return
        response = flow.response
        response.headers[self.header] = instance.name
        router = self.router
        assigned = response.headers.get(SESSION_ID)
        learns = router is not None and router.learns
        if learns and assigned and assigned != flow.request.headers.get(SESSION_ID):
            router.learn(assigned, instance)
        if not is_event_stream(response.headers.get("content-type")):
            return
        # SSE passes on unbuffered (mitmproxy buffers bodies by default, which holds back a stream).
        if learns and flow.request.method == "GET" and assigned is None and response.status_code < 300:
            inner = response.stream if callable(response.stream) else None
            response.stream = EndpointLearner(router, instance, inner)  # legacy `GET /sse`
        elif not response.stream:
            response.stream = True

    def response(self, flow) -> None:
        self.upstream.after(flow)
        router = self.router
        if router is None or not router.learns or flow.request.method != "DELETE" or flow.response.status_code >= 300:
            return
        if key := flow.request.headers.get(SESSION_ID):
            router.forget(key)


addons = [Balancer()]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m mcpbench.proxies.balancer --upstream URL --listen HOST:PORT [--faults] [--set NAME=VALUE …]`.

    The balancer in mitmproxy's reverse mode, in-process, and the fault addon after it with
    `--faults` (`proxies/faults.py`), until SIGINT or SIGTERM. `--set` takes the addons' options as
    mitmdump's does. A bad argument or option value: one line, exit 2; the address taken: exit 3.
    """
    import asyncio

    from mitmproxy import exceptions

    from mcpbench.cliutil import OneLineParser
    from mcpbench.protocol.errors import McpbenchError
    from mcpbench.proxies.host import parse_listen, parse_upstream, reverse_master, run_master
    from mcpbench.proxies.metered import metered
    from mcpbench.companions.options import TelemetryOptions

    parser = OneLineParser("mcpbench balancer", prog="python -m mcpbench.proxies.balancer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, metavar="URL", help="the reverse target (an instance; requests go where the policy says)")
    parser.add_argument("--listen", required=True, metavar="HOST:PORT")
    parser.add_argument("--faults", action="store_true", help="also inject faults (the mcpbench_faults_* options)")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="NAME=VALUE", help="an addon option; repeatable")
    parser.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus metrics of the traffic on http://HOST:PORT/metrics")
    parser.add_argument("--otlp", metavar="URL", help="send spans and metrics of the traffic over OTLP/HTTP to URL")
    parser.add_argument("--service-name", default="mcpbench", metavar="NAME", help="the service.name of those spans and metrics")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad argument (2, said in one line)
        return exc.code if isinstance(exc.code, int) else 2

    async def serve() -> None:
        master = reverse_master(spec, host, port)
        # lazy: connect upstream once the request has picked its instance, not on accept
        master.options.update(connection_strategy="lazy")
        with metered(master, telemetry):  # the recorder, first, when metrics are asked for
            master.addons.add(Balancer())
            if args.faults:
                from mcpbench.proxies.faults import Faults

                master.addons.add(Faults())
            master.options.set(*args.settings)
            await run_master(master, host, port)

    try:
        spec, _ = parse_upstream(args.upstream)
        host, port = parse_listen(args.listen)
        telemetry = TelemetryOptions.parse(args.otlp, args.metrics, args.service_name)
        asyncio.run(serve())
    except exceptions.OptionsError as exc:  # the balancer's own name the addon; mitmproxy's do not
        print(str(exc) if str(exc).startswith("mcpbench") else f"mcpbench balancer: {exc}", file=sys.stderr)
        return 2
    except McpbenchError as exc:
        print(f"mcpbench balancer: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
