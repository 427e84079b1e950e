"""`mcpbench lab`: run lab peers. `mcp` is imported inside the commands, so the CLI stays fast."""

import functools
from dataclasses import dataclass

import click

from mcpbench.cliutil import check_output, exit_on_signal, map_errors
from mcpbench.lab.peers.quirks import UNKNOWN_SESSION_STATUSES, Quirks
from mcpbench.lab.peers.servers import ENDPOINT_PATHS
from mcpbench.protocol.transports import HTTP_TRANSPORTS, STDIO, STREAMABLE_HTTP, TRANSPORTS
from mcpbench.proxies.cli import fault_argv, fault_options, fault_texts


@click.group()
def lab() -> None:
    """Lab peers for recording, replay and load tests."""


AUTH_MODES = ("none", "bearer", "oauth")  # lab/peers/auth_server.py's (kept here: the help needs no `mcp` import)
SEALINGS = ("process", "shared")  # lab/peers/reference_server.py's (the same reason)


STATE_OPTIONS = [
    click.option("--tasks", is_flag=True, help="Add the tool work, which runs as a task when asked (2025-11-25's task "
                                               "param; 2026-07-28's io.modelcontextprotocol/tasks extension)."),
    click.option("--task-store", type=click.Path(dir_okay=False), metavar="PATH",
                 help="With --tasks: keep tasks in this SQLite file (instances naming one file share their tasks; default: in memory)."),
    click.option("--seal-state", type=click.Choice(SEALINGS),
                 help="ask's 2026-07-28 round carries a requestState the SDK seals: under a key of this process, or the lab's "
                      "shared key (what instances behind a balancer need)."),
    click.option("--progress-ledger", is_flag=True, help="Add the tool progress_ledger: what slow sent under a progress token, and how it ended."),
]


def state_options(func):
    """What the reference server keeps between a client's requests (`tasks`, `task_store`, `seal_state`,
    `progress_ledger`), as `lab serve` and `lab up` take them."""
    for option in reversed(STATE_OPTIONS):
        func = option(func)
    return func


@dataclass(frozen=True, kw_only=True)
class LabArgs:
    """What `lab serve` and `lab up` share, as given: the transport's shape, the state options, the quirks."""

    transport: str
    json_response: bool
    stateless: bool
    resumable: bool
    tasks: bool
    task_store: str | None
    seal_state: str | None
    progress_ledger: bool
    quirks: Quirks

    def check(self) -> None:
        """Raises: click.UsageError: options that do not go together (exit 2)."""
        if self.transport != STREAMABLE_HTTP and (self.json_response or self.stateless):
            raise click.UsageError("--json-response and --stateless apply to --transport streamable-http only")
        if self.resumable and (self.transport != STREAMABLE_HTTP or self.stateless):
            raise click.UsageError("--resumable applies to stateful --transport streamable-http only (the SDK resumes nothing else)")

    def check_quirks(self) -> None:
        """Raises: click.UsageError: a quirk the transport or the other options cannot have (exit 2)."""
        quirks = self.quirks
        if quirks != Quirks() and self.transport not in ENDPOINT_PATHS:
            raise click.UsageError("the server quirks (--no-host-check, --no-delete, …) apply to the HTTP transports only")
        if quirks.leaky_events and not self.resumable:
            raise click.UsageError("--leaky-events needs --resumable (it is a flaw of the event store)")
        if quirks.replay_pause and not self.resumable:
            raise click.UsageError("--replay-pause needs --resumable (it delays a resumed stream)")
        if quirks.max_sessions is not None and self.transport != STREAMABLE_HTTP:
            raise click.UsageError("--max-sessions applies to --transport streamable-http only")

    def state_argv(self, task_store: str | None) -> list[str]:
        """The `lab serve` arguments of the state options, with `task_store` as given (checked: a task store needs tasks)."""
        if task_store and not self.tasks:
            raise click.UsageError("--task-store needs --tasks (it is where the tool work's tasks are kept)")
        return (["--tasks"] * self.tasks + (["--task-store", task_store] if task_store else [])
                + (["--seal-state", self.seal_state] if self.seal_state else []) + ["--progress-ledger"] * self.progress_ledger)


def quirk_options(func):
    """The reference server's quirks (`lab/peers/quirks.py`), as `lab serve` and `lab up` take them: one `quirks` argument."""
    options = [
        click.option("--leaky-events", is_flag=True, help="With --resumable: replay any session's events to whoever names their id (a known flaw, kept to show it)."),
        click.option("--unknown-session-status", type=click.Choice([str(s) for s in UNKNOWN_SESSION_STATUSES]), default="404", show_default=True,
                     help="HTTP status for an unknown or ended Mcp-Session-Id (400: as some SDKs answer)."),
        click.option("--no-host-check", is_flag=True, help="No DNS-rebinding protection: serve any Host and Origin."),
        click.option("--ignore-version-header", is_flag=True, help="Do not read MCP-Protocol-Version (as servers before 2025-06-18): serve any."),
        click.option("--no-delete", is_flag=True, help="Refuse DELETE with 405: sessions end only when the server times them out."),
        click.option("--max-sessions", type=click.IntRange(min=1), metavar="N", help="Streamable HTTP: at most N sessions open at once (503 beyond)."),
        click.option("--replay-pause", type=click.FloatRange(min=0), default=0.0, metavar="SECONDS",
                     help="With --resumable: a resumed stream goes live this long after its replay (what comes meanwhile is sent on no stream: the SDK's replay-to-live window, made wide)."),
        click.option("--rewrite-method-header", is_flag=True,
                     help="A gateway's quirk: Mcp-Method and Mcp-Name are set from the body, so a mismatch never reaches the server."),
    ]

    @functools.wraps(func)
    def wrapper(*args, leaky_events, unknown_session_status, no_host_check, ignore_version_header, no_delete, max_sessions,
                rewrite_method_header, replay_pause, **kwargs):
        quirks = Quirks(unknown_session_status=int(unknown_session_status), host_check=not no_host_check,
                        version_header=not ignore_version_header, delete=not no_delete, max_sessions=max_sessions,
                        leaky_events=leaky_events, method_header=not rewrite_method_header, replay_pause=replay_pause)
        return func(*args, quirks=quirks, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


@lab.command()
@click.option("--transport", type=click.Choice(TRANSPORTS), default=STDIO, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address (HTTP transports).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="Port (HTTP transports).")
@click.option("--json-response", is_flag=True, help="Streamable HTTP: answer with JSON bodies instead of SSE.")
@click.option("--stateless", is_flag=True, help="Streamable HTTP: no sessions (stateless_http).")
@click.option("--resumable", is_flag=True, help="Streamable HTTP: keep events for resumption (event ids, Last-Event-ID).")
@click.option("--auth", "auth_mode", type=click.Choice(AUTH_MODES), default="none", show_default=True,
              help="HTTP: require a bearer token (--token-env), or OAuth client credentials from the server's own "
                   "authorization server (discoverable from its 401 challenge).")
@click.option("--token-env", default="MCPBENCH_LAB_TOKEN", show_default=True, metavar="VAR",
              help="--auth bearer: the token to accept (required); --auth oauth: a fixed token accepted too (if set).")
@click.option("--client-id", default="mcpbench-lab", show_default=True, help="--auth oauth: the client id.")
@click.option("--client-secret-env", default="MCPBENCH_LAB_CLIENT_SECRET", show_default=True, metavar="VAR",
              help="--auth oauth: the variable holding the client secret.")
@click.option("--scope", default="mcp", show_default=True, help="--auth: the scope a token needs (403 without it).")
@click.option("--token-lifetime", default="1h", show_default=True, metavar="DURATION",
              help="--auth oauth: how long an issued token is accepted (e.g. 10s: renewals in a short run).")
@click.option("--request-log", type=click.Path(dir_okay=False), help="HTTP: append one JSON line per request received (time, method, path).")
@click.option("--slow", "slow_specs", multiple=True, metavar="TOOL=SHARE",
              help="Make one tool slower on purpose: slow=20% adds 20% of its own run time, echo=+5ms a fixed delay (repeatable).")
@state_options
@quirk_options
@map_errors
def serve(**given) -> None:
    """Run the reference MCP server (official Python SDK) until interrupted.

    Tools echo, add, slow, fail, big, ask (input from the client: a server request, or 2026-07-28's
    multi round-trip) and toggle_tool (adds or removes the tool extra: a tools list_changed
    notification, on listen streams in 2026-07-28); resource mcpbench://greeting; prompt summarize.
    --tasks adds work (waits ms, then says so), which runs as a task when the client asks (2025-11-25:
    tasks/get, tasks/result, tasks/list, tasks/cancel) or declares io.modelcontextprotocol/tasks
    (2026-07-28: tasks/get, tasks/cancel); the SDK 2.3 has no task runtime, so the lab serves them.
    --slow makes one of them slower on purpose (what `mcpbench compare` must then call slower).
    --seal-state and --task-store put instances behind a balancer into the states `lab run` and
    `probe` tell apart: state sealed per process or with a shared key, tasks per process or shared.

    Example: mcpbench lab serve --transport streamable-http --port 8101 --auth oauth --token-lifetime 10s
    """
    _serve(ServeArgs(**given))


@dataclass(frozen=True, kw_only=True)
class ServeArgs(LabArgs):
    """`lab serve`'s options, as given."""

    host: str
    port: int
    auth_mode: str
    token_env: str
    client_id: str
    client_secret_env: str
    scope: str
    token_lifetime: str
    request_log: str | None
    slow_specs: tuple[str, ...]


def _serve(args: ServeArgs) -> None:
    from mcpbench.lab.peers.slowdown import parse_slowdown

    try:
        slowdowns = [parse_slowdown(spec) for spec in args.slow_specs]
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    args.check()
    transport, host, port, request_log = args.transport, args.host, args.port, args.request_log
    if transport == STDIO and (args.auth_mode != "none" or request_log):
        raise click.UsageError("--auth and --request-log apply to the HTTP transports only")
    args.state_argv(args.task_store)  # checked
    args.check_quirks()
    auth = _lab_auth(args)
    from mcpbench.lab.peers.reference_server import serve as run_server
    from mcpbench.system.listen import check_listen

    if transport == STDIO:
        exit_on_signal()  # nothing to save: the SDK's event loop would print the interrupt's traceback
    if transport in ENDPOINT_PATHS:
        check_listen(host, port)  # before the banner: a busy port is one line, exit 3
        if request_log:
            check_output(request_log, "--request-log")
        # stdout stays clean (stdio speaks JSON-RPC there); this line tells a human where to point.
        url_host = f"[{host}]" if ":" in host else host
        protected = f", {args.auth_mode} auth" if auth is not None else ""
        click.echo(
            f"mcpbench: reference server ({transport}{protected}) on http://{url_host}:{port}{ENDPOINT_PATHS[transport]}",
            err=True,
        )
    try:
        run_server(transport, host=host, port=port, json_response=args.json_response, stateless=args.stateless,
                   resumable=args.resumable, auth=auth, request_log=request_log, quirks=args.quirks, slowdowns=slowdowns,
                   tasks=args.tasks, task_store=args.task_store, seal_state=args.seal_state, progress_ledger=args.progress_ledger)
    except KeyboardInterrupt:
        pass  # Ctrl-C is the normal way to stop it


def _lab_auth(args: ServeArgs):
    """The server's protection from `lab serve`'s options, or None; one line and exit 2 for a missing secret."""
    import os

    mode, host, token_env, client_secret_env = args.auth_mode, args.host, args.token_env, args.client_secret_env
    if mode == "none":
        return None
    from mcpbench.cliutil import positive_duration
    from mcpbench.lab.peers.auth_server import LabAuth, LabTokenVerifier

    lifetime = positive_duration(args.token_lifetime, "--token-lifetime")
    fixed = os.environ.get(token_env) or None
    if mode == "bearer" and fixed is None:
        raise click.UsageError(f"--auth bearer: environment variable {token_env} (--token-env) is not set")
    secret = os.environ.get(client_secret_env) or None
    if mode == "oauth" and secret is None:
        raise click.UsageError(f"--auth oauth: environment variable {client_secret_env} (--client-secret-env) is not set")
    url_host = f"[{host}]" if ":" in host else host
    verifier = LabTokenVerifier(args.client_id, args.scope, fixed)
    return LabAuth(mode, f"http://{url_host}:{args.port}", ENDPOINT_PATHS[args.transport], verifier, secret, lifetime)


# Mirror mcpbench.lab.topology.cluster's lists (importing it here would be cheap, but keeps the CLI's help
# independent of the lab's modules).
POLICIES = ("random", "round-robin", "sticky", "source", "session-hash")
BALANCERS = ("builtin", "haproxy")
FOREIGN_HOST = ("refuse", "page", "empty", "close")  # proxies/balancer.py's


@lab.command()
@click.option("--instances", type=click.IntRange(1, 16), default=3, show_default=True, help="Reference-server instances.")
@click.option("--transport", type=click.Choice(HTTP_TRANSPORTS), default=STREAMABLE_HTTP, show_default=True)
@click.option("--json-response", is_flag=True, help="Streamable HTTP: answer with JSON bodies instead of SSE.")
@click.option("--stateless", is_flag=True, help="Streamable HTTP: no sessions (stateless_http).")
@click.option("--policy", type=click.Choice(POLICIES), default="round-robin", show_default=True)
@click.option("--balancer", type=click.Choice(BALANCERS), default="builtin", show_default=True, help="mitmproxy with mcpbench's addon, or HAProxy.")
@click.option("--port", type=click.IntRange(1, 65535), help="The balancer's port on 127.0.0.1 (default: an ephemeral one).")
@click.option("--detach", is_flag=True, help="Run in the background; stop with `mcpbench lab down`.")
@click.option("--resumable", is_flag=True, help="Streamable HTTP: instances keep events for resumption (Last-Event-ID).")
@fault_options
@click.option("--restart-every", metavar="T", help="Kill and restart an instance (s1, s2, … in turn) on its port every T: its sessions are gone.")
@click.option("--restart-at", metavar="T", help="Kill and restart s1 on its port once, T after the start.")
@click.option("--foreign-host", type=click.Choice(FOREIGN_HOST), default="refuse", show_default=True,
              help="How the built-in balancer answers a foreign Host: refuse (421, as the SDKs), page (200, a welcome page), "
                   "empty (200, no body), close (no answer).")
@state_options
@quirk_options
@map_errors
def up(**given):
    """Start N reference-server instances behind a balancer on 127.0.0.1, until Ctrl-C or SIGTERM.

    Prints the URL to use and each instance's URL. Every response names the instance that served
    it in an X-Mcpbench-Instance header.

    Example: mcpbench lab up --instances 3 --transport sse --policy sticky --balancer haproxy
    """
    faults = fault_texts(given)
    _up(UpArgs(faults=faults, **given))


@dataclass(frozen=True, kw_only=True)
class UpArgs(LabArgs):
    """`lab up`'s options, as given (`faults`: the fault options' texts, `proxies/cli.py`'s `fault_texts`)."""

    instances: int
    policy: str
    balancer: str
    port: int | None
    detach: bool
    faults: dict
    fault_log: str | None
    restart_every: str | None
    restart_at: str | None
    foreign_host: str


def _up(args: UpArgs) -> None:
    import sys
    from pathlib import Path

    from mcpbench.cliutil import check_output
    from mcpbench.lab.topology.cluster import RestartPlan
    from mcpbench.lab.topology.up import run_detached, run_foreground
    from mcpbench.proxies.faultplan import parse_plan, parse_time

    args.check()
    args.check_quirks()
    transport, port, fault_log = args.transport, args.port, args.fault_log
    restart_every, restart_at, foreign_host = args.restart_every, args.restart_at, args.foreign_host
    # Every instance names the one task store: made absolute, as the instances run from the repository.
    serve_args = args.state_argv(str(Path(args.task_store).resolve()) if args.task_store else None)
    texts = args.faults
    parse_plan(**texts)  # a bad value is one line before anything starts
    restarts = RestartPlan(
        every=parse_time(restart_every, "--restart-every", positive=True) if restart_every else None,
        at=parse_time(restart_at, "--restart-at") if restart_at else None,
    )
    check_output(fault_log, "--fault-log")
    if args.detach:
        argv = ["--instances", str(args.instances), "--transport", transport, "--policy", args.policy, "--balancer", args.balancer]
        argv += ["--json-response"] * args.json_response + ["--stateless"] * args.stateless + ["--resumable"] * args.resumable
        argv += ["--port", str(port)] if port else []
        argv += fault_argv(texts, fault_log and str(Path(fault_log).resolve()))
        argv += [f"--restart-every={restart_every}"] * bool(restart_every) + [f"--restart-at={restart_at}"] * bool(restart_at)
        argv += args.quirks.argv() + ["--foreign-host", foreign_host] * (foreign_host != "refuse") + serve_args
        sys.exit(run_detached(argv, click.echo))
    sys.exit(run_foreground(
        instances=args.instances, transport=transport, policy=args.policy, balancer=args.balancer,
        json_response=args.json_response, stateless=args.stateless, port=port,
        say=lambda line: click.echo(line, err=line.startswith("mcpbench: lab process")), resumable=args.resumable,
        faults=texts, restarts=restarts, fault_log=Path(fault_log) if fault_log else None, quirks=args.quirks,
        foreign_host=foreign_host, serve_args=serve_args,
    ))


@lab.command()
@map_errors
def down():
    """Stop every lab started with `mcpbench lab up --detach` (from this folder).

    Example: mcpbench lab down
    """
    import sys

    from mcpbench.lab.topology.up import down as stop_all

    sys.exit(stop_all(click.echo))


@lab.command("run")
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(file_okay=False), help="Folder for this run (default: results/<time>-sticky/ or -reconnect/).")
@map_errors
def run_experiment(**given):
    """Run the lab experiment of SCENARIO: sticky sessions, or reconnects under faults.

    A sticky scenario (modes, policies, instances) writes sticky.csv and sticky.png; a
    reconnect scenario (transports, faults, policies) writes reconnect.csv,
    reconnect-timeline.png and recovery.png. Both print their table.

    Example: mcpbench lab run scenarios/sticky-sessions.yaml
    """
    _run_experiment(ExperimentArgs(**given))


@dataclass(frozen=True, kw_only=True)
class ExperimentArgs:
    """`lab run`'s options, as given."""

    scenario: str
    out: str | None


def _run_experiment(args: ExperimentArgs) -> None:
    from pathlib import Path

    from mcpbench.lab.experiments import reconnect, sticky
    from mcpbench.files.outputs import new_run_folder
    from mcpbench.files.yamlnodes import compose_yaml

    root = compose_yaml(args.scenario)
    kind = reconnect if reconnect.is_reconnect_scenario(root) else sticky
    plan = kind.plan_from_node(root, str(args.scenario))
    folder = Path(args.out) if args.out else new_run_folder(Path("results"), "reconnect" if kind is reconnect else "sticky")
    folder.mkdir(parents=True, exist_ok=True)
    results = kind.run_plan(plan, folder, say=click.echo)
    click.echo(kind.render(results))
    click.echo(f"mcpbench: results in {folder}")
