"""`mcpbench faults`: mitmproxy's reverse mode, in-process (`mcpbench.proxies.host`), with the fault addon.

    run_faults("http://127.0.0.1:8000/mcp", listen="127.0.0.1:8082", texts={"drop": "5%"}, log="f.jsonl")

runs until SIGINT or SIGTERM. The option texts are checked (`parse_plan`) before anything starts.
"""

import asyncio
import sys
from collections.abc import Callable, Mapping

from mcpbench.companions.options import TelemetryOptions
from mcpbench.system.listen import check_listen
from mcpbench.proxies.faultplan import ADDON_OPTIONS, LOG_OPTION, parse_plan
from mcpbench.proxies.host import Announce, parse_listen, parse_upstream, probe, reverse_master, run_master
from mcpbench.proxies.metered import metered

DEFAULT_LISTEN = "127.0.0.1:8082"


def _default_ready(url: str) -> None:
    print(url, flush=True)
    print(f"mcpbench: faults in front of the upstream at {url} (Ctrl-C stops)", file=sys.stderr, flush=True)


async def _serve(spec: str, path: str, host: str, port: int, texts: Mapping[str, str | None], log: str | None, on_ready,
                 telemetry: TelemetryOptions) -> None:
    from mcpbench.proxies.faults import Faults

    master = reverse_master(spec, host, port)
    master.options.update(connection_strategy="lazy")
    with metered(master, telemetry):  # the recorder, first, when metrics are asked for
        master.addons.add(Faults(), Announce(path, on_ready))
        settings = {ADDON_OPTIONS[name]: str(value) for name, value in texts.items() if value is not None}
        master.options.update(**settings, **{LOG_OPTION: log or ""})
        await run_master(master, host, port)


def run_faults(
    upstream: str,
    *,
    listen: str = DEFAULT_LISTEN,
    texts: Mapping[str, str | None] = {},  # noqa: B006 (read only)
    log: str | None = None,
    on_ready: Callable[[str], None] | None = None,
    telemetry: TelemetryOptions = TelemetryOptions(),
) -> None:
    """Reverse-proxy `listen` to `upstream`, injecting the faults `texts` name, until SIGINT/SIGTERM.
    `telemetry`: spans and metrics of the traffic (`proxies/metered.py`).

    Raises:
        FaultConfigError: an option text that cannot be used (exit 2).
        BadTargetError, BindError: bad `upstream`/`listen`; the listen address is taken or unknown.
    """
    plan = parse_plan(**texts)
    spec, path = parse_upstream(upstream)
    host, port = parse_listen(listen)
    check_listen(host, port)
    if problem := probe(spec):
        print(f"mcpbench: warning: {spec} {problem}; proxying anyway", file=sys.stderr, flush=True)
    if not plan.any:
        print("mcpbench: note: no fault chosen; passing traffic through untouched", file=sys.stderr, flush=True)
    asyncio.run(_serve(spec, path, host, port, texts, log, on_ready or _default_ready, telemetry))
