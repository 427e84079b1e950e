"""What every click command shares: error mapping, signal handling and common options.

A module of its own so each capability's `cli.py` can import it without
importing `mcpbench.cli`, which registers them all.
"""

import argparse
import atexit
import contextlib
import functools
import importlib
import math
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

import click

from mcpbench.system.processes import STOP_SIGNALS
from mcpbench.protocol.errors import EXIT_INPUT, EXIT_SIGNAL_BASE, McpbenchError, OutputError, TraceWriteError
from mcpbench.trace.redact import Redactor

# The stop signal received by this process, if any (see `note_signal`).
received: int | None = None


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so the same `finally` blocks and handlers clean up."""


def note_signal(signum: int) -> None:
    """Remember a stop signal; the command then exits 128 + signum however it unwinds."""
    global received
    received = received or signum


def _raise_on_signal(signum: int, frame: object) -> None:
    if received is not None:
        return  # already stopping: a second raise would land in the clean-up of the first
    note_signal(signum)
    raise KeyboardInterrupt() if signum == signal.SIGINT else Terminated()


def _note_only(signum: int, frame: object) -> None:
    note_signal(signum)


def _exiting() -> None:
    """The process is exiting (atexit) with its status decided: from here on a stop signal is
    ignored. Not noted: the interpreter's exit puts Python's handlers back to the default, and a
    signal landing then (a second Ctrl-C, say) would kill the process by it instead of letting it
    exit with its status."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def install_stop_handlers() -> None:
    """SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP `Terminated`, each remembered for the exit
    status; at the process's exit they are ignored (`_exiting`)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _raise_on_signal)
    atexit.unregister(_exiting)  # once
    atexit.register(_exiting)


@contextlib.contextmanager
def stop_signals_noted():
    """Within: a stop signal only sets the exit status, for work that must end whole (results being
    written, child processes being stopped); the command stops once it is done. A no-op outside
    the main thread, where no handler can be set."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _note_only) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def signal_status(signum: int) -> int:
    return EXIT_SIGNAL_BASE + signum


def exit_on_signal() -> None:
    """Make a stop signal (`STOP_SIGNALS`) end the process at once, 128 + signum, with one line.

    For a command with nothing to save or release (a stdio server inside an event loop):
    an exception raised into an event loop lands in whichever callback runs, and tasks
    and weakref callbacks print it with a traceback.
    """

    def stop(signum: int, frame: object) -> None:
        sys.stdout.flush()
        print(f"mcpbench: stopped by {signal.Signals(signum).name}", file=sys.stderr, flush=True)
        os._exit(signal_status(signum))

    for sig in STOP_SIGNALS:
        signal.signal(sig, stop)


class LazyGroup(click.Group):
    """A group whose commands may live in modules imported only when one of them runs (or help lists them).

    `lazy`: command name -> "module:attribute". A command's process then imports its own capability,
    not every other's: `mcpbench tee` or `lab serve` start without loading load, fuzz, probe and the rest.
    """

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy:
            module, _, attribute = self.lazy[name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)


class OneLineErrors(LazyGroup):
    """A group whose usage errors are one line on stderr (`mcpbench: Invalid value for '--port': …`), exit 2.

    Click's own output adds a usage line and a hint around the message; a user, a script or a
    host's log then sees three lines for one mistake.
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            status = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Abort:  # Ctrl-C outside a command's own handling (while parsing, say)
            signum = received or signal.SIGINT
            click.echo(f"mcpbench: stopped by {signal.Signals(signum).name}", err=True)
            sys.exit(signal_status(signum))
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.format_message(), err=True)  # the help asked for by giving nothing
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"mcpbench: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(status if isinstance(status, int) else 0)


class OneLineParser(argparse.ArgumentParser):
    """The arguments of a module run with `python -m` (a lab peer, the balancer): a bad one is one
    line on stderr, `LABEL: message`, and exit 2, as every command's."""

    def __init__(self, label: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.label = label

    def error(self, message: str) -> NoReturn:
        print(f"{self.label}: {message}", file=sys.stderr)
        raise SystemExit(EXIT_INPUT)


def map_errors(func):
    """Run a command: an expected failure becomes one line on stderr and its exit status (no traceback).

    `McpbenchError`s exit with their `exit_code`; an `OSError` naming a file (an output folder that
    cannot be written, say) exits 2 naming it. Ctrl-C, SIGTERM and SIGHUP exit 130, 143 and 129, with
    no traceback, whether they unwound the command or the command caught them and returned.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        global received
        received = None  # a signal an earlier command in this process got (a test's, an embedder's) is not this one's
        install_stop_handlers()
        try:
            try:
                result = func(*args, **kwargs)
            finally:
                for sig in STOP_SIGNALS:  # from here on, exiting: a signal only sets the status
                    signal.signal(sig, _note_only)
        except SystemExit:
            if received:  # the command ended on its own terms after a stop signal: the signal decides
                click.echo(f"mcpbench: stopped by {signal.Signals(received).name}", err=True)
                sys.exit(signal_status(received))
            raise
        except McpbenchError as exc:
            if not getattr(exc, "reported", False):  # else it was said when it happened
                # A message may quote a URL or command line given with a secret in it.
                click.echo(f"mcpbench: {Redactor().text(str(exc))}", err=True)
            # A recording that failed says more than the Ctrl-C that ended it: the trace is incomplete.
            stopped = received and not isinstance(exc, TraceWriteError)
            sys.exit(signal_status(received) if stopped else exc.exit_code)
        except KeyboardInterrupt as exc:
            signum = received or (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
            click.echo(f"mcpbench: stopped by {signal.Signals(signum).name}", err=True)
            sys.exit(signal_status(signum))
        except BaseExceptionGroup as group:  # an async task group (anyio) that the stop unwound
            if received is None or group.subgroup(KeyboardInterrupt) is None:
                raise
            click.echo(f"mcpbench: stopped by {signal.Signals(received).name}", err=True)
            sys.exit(signal_status(received))
        except OSError as exc:
            if exc.filename is None:
                raise
            click.echo(f"mcpbench: {exc.filename}: {exc.strerror}", err=True)
            sys.exit(received and signal_status(received) or EXIT_INPUT)
        if received:
            click.echo(f"mcpbench: stopped by {signal.Signals(received).name}", err=True)
            sys.exit(signal_status(received))
        return result

    return wrapper


def check_output(path: str | os.PathLike | None, option: str, *, folder: bool = False) -> None:
    """Fail before any work when `option`'s `path` cannot be written (exit 2, naming both).

    The folder that will hold it (`path` itself with `folder`) is created when missing, as the
    writers would; a path under a file, or a folder that cannot be written, is refused.
    """
    if path is None:
        return
    where = Path(path) if folder else Path(path).parent
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{option} {path}: cannot create folder {exc.filename or where}: {exc.strerror}") from None
    if not os.access(where, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {path}: folder {where} is not writable")
    if not folder and Path(path).is_dir():
        raise OutputError(f"{option} {path}: is a folder, not a file")


class FiniteFloatRange(click.FloatRange):
    """A `FloatRange` that also refuses nan and infinity (which pass any range check)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def positive_duration(text: str, option: str, *, zero: bool = False) -> float:
    """An option's duration (`10s`, `500ms`, `1h`) in seconds, > 0 (>= 0 with `zero`); a usage error
    (exit 2) naming it otherwise."""
    from mcpbench.measures.durations import parse_duration

    try:
        seconds = parse_duration(text, option)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if seconds < 0 or (seconds == 0 and not zero):
        raise click.UsageError(f"{option} must be {'>=' if zero else '>'} 0")
    return seconds


# A wait, a gap or a rate: a number > 0.
POSITIVE = FiniteFloatRange(min=0, min_open=True)
# A number that may be zero (a factor where 0 turns a check off, a slack).
NON_NEGATIVE = FiniteFloatRange(min=0)


def redact_option(func):
    """`--redact NAME|PATH`, repeatable."""
    return click.option(
        "--redact",
        multiple=True,
        metavar="NAME|PATH",
        help="Also redact this header / JSON key (name) or JSON path (a.b.*.c). Repeatable.",
    )(func)
