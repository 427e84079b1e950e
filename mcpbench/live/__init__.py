"""The live view of a trace being written: `mcpbench inspect --follow`, `tee --live`, `record --live`.

`feed.py` follows a trace and rebuilds its sessions as it grows (what an exporter could consume
too); `view.py` shows it in a terminal (Textual), `pipe.py` prints a line per event without one;
`launch.py` opens the view for a recorder on its terminal.
"""

import os
import sys


def run_live(path: str | os.PathLike) -> int:
    """Follow the trace at `path`: the view on a terminal, else a line per event; the exit status.

    Raises:
        TraceError: the trace cannot be followed (missing, not a trace, a bad line): exit 2.
        EnvironmentProblem: the terminal is too small for the view: exit 3.
    """
    from mcpbench.live.feed import LiveFeed

    feed = LiveFeed(path)
    first = feed.poll()  # a missing file or one that is no trace: one line, before any screen
    if all(stream.isatty() for stream in (sys.stdin, sys.stdout, sys.stderr)):
        from mcpbench.live.view import run_view

        return run_view(feed, first)
    from mcpbench.live.pipe import run_pipe

    return run_pipe(feed, first)
