"""`mcpbench record`: mitmproxy's reverse mode, in-process (`mcpbench.proxies.host`), with the recording addon.

    path = run_record("http://127.0.0.1:8000/mcp", listen="127.0.0.1:8081", out="t.jsonl")

runs until SIGINT or SIGTERM (Ctrl-C), then lets mitmproxy's `done` hooks end open streams and
close the trace, so the file is complete. mitmproxy is imported only when a recording starts.
"""

import asyncio
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from mcpbench.companions.live import LiveView
from mcpbench.companions.options import TelemetryOptions
from mcpbench.companions.telemetry import Companion
from mcpbench.system.listen import check_listen
from mcpbench.protocol.errors import BadTargetError, TraceError, TraceWriteError
from mcpbench.proxies.host import Announce, UpstreamTls, parse_listen, parse_upstream, probe, reverse_master, run_master
from mcpbench.record import DEFAULT_UPSTREAM_TIMEOUT
from mcpbench.trace.redact import Redactor

DEFAULT_LISTEN = "127.0.0.1:8081"


def _default_ready(url: str) -> None:
    print(url, flush=True)
    hint = Redactor().url(url)  # stdout has the URL as given; the log line hides its secrets
    print(f"mcpbench: point clients at {hint} (Ctrl-C stops and completes the trace)", file=sys.stderr, flush=True)


async def _serve(spec: str, path: str, host: str, port: int, out: Path, redact: Sequence[str], on_ready, upstream_timeout: int,
                 tls: UpstreamTls, host_header: str):
    from mitmproxy import exceptions

    from mcpbench.record.addon import make_addons

    master = reverse_master(spec, host, port)
    (recorder,) = make_addons(upstream_timeout=True)
    master.addons.add(recorder, Announce(path, on_ready))
    try:
        master.options.update(mcpbench_out=str(out), mcpbench_redact=list(redact), mcpbench_upstream_timeout=upstream_timeout,
                              mcpbench_host_header=host_header, **tls.options())
    except exceptions.OptionsError as exc:
        raise recorder.output.open_error or TraceError(str(exc)) from None
    await run_master(master, host, port)
    return recorder.output


def run_record(
    upstream: str,
    *,
    listen: str = DEFAULT_LISTEN,
    out: str | None = None,
    redact: Sequence[str] = (),
    on_ready: Callable[[str], None] | None = None,
    upstream_timeout: int = DEFAULT_UPSTREAM_TIMEOUT,
    tls: UpstreamTls = UpstreamTls(),
    live: bool = False,
    telemetry: TelemetryOptions = TelemetryOptions(),
    host_header: str = "auto",
) -> Path:
    """Reverse-proxy `listen` to `upstream`, recording to `out`, until SIGINT/SIGTERM.

    `on_ready` gets the URL clients should use (default: print it on stdout, and a hint on stderr).
    With `live`, the live view of the trace then opens on the terminal stderr is on (`companions/live.py`).
    An upstream that has not begun an answer after `upstream_timeout` s (0: no limit) gets its
    client a 504 and the trace an error event. `tls`: how an https upstream's certificate is checked.
    `telemetry`: spans and metrics, sent by a companion process that follows the trace (never from
    mitmproxy's event loop).
    `host_header`: the Host the upstream gets (`record/hosts.py`: auto, client or upstream).

    Returns:
        The trace file, complete.

    Raises:
        BadTargetError, BindError: bad `upstream`/`listen`; the listen address is taken or unknown.
        TraceError: the trace file cannot be created.
        TraceWriteError: the trace could not be written to the end (the proxy served on).
    """
    from mcpbench.trace.writer import default_trace_path

    spec, path = parse_upstream(upstream)
    if (tls.ca or tls.insecure) and not spec.startswith("https:"):
        option = "--upstream-ca" if tls.ca else "--upstream-insecure"
        raise BadTargetError(f"{option} is for an https:// upstream; --upstream {upstream!r} is not one")
    host, port = parse_listen(listen)
    check_listen(host, port)  # fail early, with one line, when it is taken (mitmproxy would only log it)
    trace = Path(out) if out else default_trace_path(urlsplit(spec).netloc)
    companion = Companion.check(telemetry, trace)
    if problem := probe(spec, tls):
        print(f"mcpbench: warning: {spec} {problem}; recording anyway", file=sys.stderr, flush=True)
    print(f"mcpbench: recording {spec}{Redactor(redact).url(path)} to {trace}", file=sys.stderr, flush=True)
    ready = on_ready or _default_ready
    view = LiveView(trace) if live else None
    if view is not None or companion is not None:
        def ready(url: str, announce=ready) -> None:
            announce(url)
            if companion is not None:
                companion.start()
            if view is not None:
                view.open()
    try:
        output = asyncio.run(_serve(spec, path, host, port, trace, redact, ready, upstream_timeout, tls, host_header))
    finally:
        if view is not None:
            view.close()
        if companion is not None:
            companion.stop()
    if output.failed:  # said on stderr when it happened; the proxy kept serving
        raise TraceWriteError(output.failed, reported=True)
    print(f"mcpbench: wrote {output.events_written} events to {trace}", file=sys.stderr, flush=True)
    return trace
