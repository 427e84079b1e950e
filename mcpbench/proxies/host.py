"""Hosting mitmproxy in-process: a reverse proxy with only the addons it needs, run until a stop signal.

    spec, path = parse_upstream("http://127.0.0.1:8000/mcp")
    master = reverse_master(spec, "127.0.0.1", 8081)
    master.addons.add(MyAddon(), Announce(path, print))
    asyncio.run(run_master(master, "127.0.0.1", 8081))

`mcpbench record` (`record/proxy.py`), `mcpbench faults` (`proxies/faultproxy.py`) and the lab's
balancer process (`python -m mcpbench.proxies.balancer`) run their addons here rather than in mitmdump.
mitmproxy offers every flow event to each addon in its chain (with a context manager and a
coroutine per addon, and again as an `update` event), so mitmdump's thirty-odd addons, idle here,
cost more CPU per exchange than the recording itself. mitmproxy is imported only when a master is
made.
"""

import asyncio
import logging
import signal
import socket
import ssl
import sys
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcpbench.system.listen import parse_address
from mcpbench.system.processes import STOP_SIGNALS, settled
from mcpbench.protocol.errors import BadTargetError, BindError

# The listen address the parse errors give as an example (`mcpbench record`'s default).
EXAMPLE_LISTEN = "127.0.0.1:8081"

# How long the start-up probe of the upstream may take: it only decides whether to warn.
PROBE_TIMEOUT = 1.0


def parse_upstream(url: str) -> tuple[str, str]:
    """`http://host:port/mcp` -> (`http://host:port`, `/mcp`): mitmproxy's reverse spec takes no path.

    Raises:
        BadTargetError: not an http(s) URL with a host.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadTargetError(f"--upstream {url!r}: expected an http:// or https:// URL, such as http://127.0.0.1:8000/mcp")
    try:
        port = parts.port
    except ValueError:
        raise BadTargetError(f"--upstream {url!r}: bad port") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    spec = f"{parts.scheme}://{host}" + (f":{port}" if port else "")
    path = parts.path if parts.path not in ("", "/") else ""
    if parts.query:
        path += "?" + parts.query
    return spec, path


def parse_listen(listen: str) -> tuple[str, int]:
    """`127.0.0.1:8081` -> (`127.0.0.1`, 8081); `[::1]:8081` for IPv6; port 0 picks a free one.

    Raises:
        BadTargetError: not HOST:PORT.
    """
    return parse_address(listen, "--listen", EXAMPLE_LISTEN)


@dataclass(frozen=True, slots=True)
class UpstreamTls:
    """How the proxy checks an https upstream's certificate: the CAs it trusts (PEM), or not at all."""

    ca: str | None = None  # None: the certifi bundle, as mitmproxy's default
    insecure: bool = False

    def options(self) -> dict:
        """The mitmproxy options that make the proxy verify so."""
        return {"ssl_insecure": self.insecure, "ssl_verify_upstream_trusted_ca": self.ca}

    def context(self) -> ssl.SSLContext:
        """A client context that verifies as mitmproxy will (for the start-up probe).

        Raises:
            BadTargetError: the CA file is not one.
        """
        if self.insecure:  # asked for with --upstream-insecure
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        try:
            if self.ca is None:
                import certifi

                return ssl.create_default_context(cafile=certifi.where())
            return ssl.create_default_context(cafile=self.ca)
        except ssl.SSLError:
            raise BadTargetError(f"--upstream-ca {self.ca}: no PEM certificate in it") from None
        except OSError as exc:
            raise BadTargetError(f"--upstream-ca {self.ca}: {exc.strerror}") from None


def probe(spec: str, tls: UpstreamTls | None = None) -> str | None:
    """What is wrong with the upstream right now, as a phrase after its URL, or None.

    A warning only: the upstream may start later. With `tls`, an https upstream also gets a TLS
    handshake verified as the proxy will verify it: a certificate the proxy refuses turns every
    request into a 502, so the phrase names the options that fix that.
    """
    parts = urlsplit(spec)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    context = tls.context() if tls is not None and parts.scheme == "https" else None
    try:
        with socket.create_connection((parts.hostname, port), timeout=PROBE_TIMEOUT) as sock:
            if context is not None:
                with context.wrap_socket(sock, server_hostname=parts.hostname):
                    pass
            return None
    except ssl.SSLCertVerificationError as exc:
        return f"has a certificate the proxy will refuse ({exc.verify_message}); --upstream-ca FILE trusts its CA, --upstream-insecure skips the check"
    except ssl.SSLError as exc:  # not a certificate matter: those options would not help
        return f"fails the TLS handshake ({exc.reason or exc})"
    except OSError as exc:
        return f"does not answer now ({exc.strerror or exc})"


def keep_client_host(options) -> None:
    """Stop mitmproxy's reverse mode from rewriting `Host` before the addons see it (`keep_host_header`):
    an addon that checks the client's `Host` or records it must see what the client sent, and then
    sets the upstream's itself where it has to."""
    if any(str(mode).startswith("reverse:") for mode in options.mode) and not options.keep_host_header:
        options.update(keep_host_header=True)


class Announce:
    """An addon that says where clients should connect once mitmproxy listens (port 0 is known only then).

    `on_ready` gets `http://host:port` followed by `path`.
    """

    def __init__(self, path: str, on_ready: Callable[[str], None]) -> None:
        self.path = path
        self.on_ready = on_ready

    def running(self) -> None:
        from mitmproxy import ctx

        server = ctx.master.addons.get("proxyserver")
        host, port = server.listen_addrs()[0][:2]
        host = f"[{host}]" if ":" in host else host
        self.on_ready(f"http://{host}:{port}{self.path}")


def reverse_master(spec: str, host: str, port: int):
    """A mitmproxy master in reverse mode to `spec`, listening on host:port, its warnings on stderr.

    It carries only what a reverse proxy of mcpbench's uses: mitmproxy's core, the proxy server and
    its layer choice, TLS to an https upstream, the refusal of non-local clients (`block`), h2c and
    Alt-Svc handling as mitmdump does them, and the start-up error check. Add the proxy's own
    addons to `master.addons`, then set their options.
    """
    from mitmproxy import master, options
    from mitmproxy.addons import (
        block, core, disable_h2c, errorcheck, next_layer, proxyserver, termlog, tlsconfig, update_alt_svc,
    )

    opts = options.Options(mode=[f"reverse:{spec}"], listen_host=host, listen_port=port)
    lean = master.Master(opts)
    lean.addons.add(
        core.Core(),
        block.Block(),
        disable_h2c.DisableH2C(),
        proxyserver.Proxyserver(),
        next_layer.NextLayer(),
        tlsconfig.TlsConfig(),
        update_alt_svc.UpdateAltSvc(),
        errorcheck.ErrorCheck(),
        termlog.TermLog(out=sys.stderr),  # mitmproxy's own warnings, on stderr
    )
    opts.update(termlog_verbosity="warn")
    return lean


def _quiet_cancelled(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """asyncio's handler, minus the traceback for a client connection the stop cut short."""
    if isinstance(context.get("exception"), asyncio.CancelledError):
        return
    loop.default_exception_handler(context)


class _QuietCancelled(logging.Filter):
    """Drops asyncio's report of a task the stop cancelled (a client connection cut short), for a
    host whose loop handler is not `_quiet_cancelled`: mitmdump's, which is gone once the master stops."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


_QUIET_CANCELLED = _QuietCancelled()


def _stop(signum: int, master) -> None:
    """A stop signal: let mitmproxy finish (its `done` hooks run); the command exits 128 + signum."""
    from mcpbench.cliutil import note_signal

    note_signal(signum)
    master.shutdown()


def stock_host_stops(master) -> None:
    """For an addon inside a stock mitmdump, what `run_master` does for mcpbench's own masters: a
    hang-up (SIGHUP: the terminal or SSH session gone), which mitmdump leaves to kill it with the
    addons' `done` hooks unrun, stops the master as SIGTERM does; and a client connection the stop
    cuts short prints no traceback. Nothing changes where the host handles them (`mcpbench record`),
    nor outside a running event loop's main thread (tests driving an addon's hooks).

    And the stop signals are unblocked: a process started with them blocked (the mask of the thread
    that started it is inherited across exec) keeps them pending for ever, so mitmdump never stopped."""
    try:
        loop = asyncio.get_running_loop()
        if signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
            loop.add_signal_handler(signal.SIGHUP, master.shutdown)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # after the handler: one pending since is taken
    except (RuntimeError, ValueError):
        return
    logging.getLogger("asyncio").addFilter(_QUIET_CANCELLED)  # once: a filter is added once
    settled()  # mitmdump and its addons are loaded


async def run_master(master, host: str, port: int) -> None:
    """Run `master` until a stop signal, SIGINT, SIGTERM or SIGHUP (then its `done` hooks run).

    Raises:
        BindError: mitmproxy could not listen on host:port.
    """
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_quiet_cancelled)
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, _stop, sig, master)
    settled()
    try:
        await master.run()
    except SystemExit:
        raise BindError(f"--listen {host}:{port}: mitmproxy could not start there (see its errors above)") from None
    finally:
        for sig, handler in previous.items():  # asyncio leaves the default: a second stop would kill the process
            loop.remove_signal_handler(sig)
            if handler is not None:  # None: one not set from Python, which asyncio's replaced for good
                signal.signal(sig, handler)
