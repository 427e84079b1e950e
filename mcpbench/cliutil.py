"""What every click command shares: error mapping and common options.

A module of its own so each capability's `cli.py` can import it without
importing `mcpbench.cli`, which imports them all.
"""

import functools
import sys

import click

from mcpbench.protocol.errors import McpbenchError
from mcpbench.trace.redact import Redactor

# Exit status for unusable input or a failure to run.
EXIT_FAILURE = 2


def map_errors(func):
    """Turn an expected failure into one line on stderr and exit status 2 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except McpbenchError as exc:
            if not getattr(exc, "reported", False):  # else it was said when it happened
                # A message may quote a URL or command line given with a secret in it.
                click.echo(f"mcpbench: {Redactor().text(str(exc))}", err=True)
            sys.exit(getattr(exc, "exit_code", EXIT_FAILURE))

    return wrapper


def redact_option(func):
    """`--redact NAME|PATH`, repeatable."""
    return click.option(
        "--redact",
        multiple=True,
        metavar="NAME|PATH",
        help="Also redact this header / JSON key (name) or JSON path (a.b.*.c). Repeatable.",
    )(func)
