"""The live view without a terminal: one line per event on stdout, as `tail -f` prints lines.

Runs until the recording is known to be over (a compressed trace read whole, a killed recording's
spool read, a stdio server's recording complete: exit 0), the reader of the pipe goes (exit 0),
or a stop signal (130, 143).
"""

import os
import sys
import time
from typing import TextIO

from mcpbench.live.feed import LiveFeed, rows
from mcpbench.live.lines import text

# How often the trace is looked at when nothing new came: a line on disk is printed within this.
POLL_SECONDS = 0.01


def run_pipe(feed: LiveFeed, first: list | None = None, out: TextIO | None = None) -> int:
    """Print each event of `feed` as a line until the recording is over; the exit status.

    Raises:
        TraceError: the trace cannot be followed (missing, not a trace, a bad line).
    """
    out = out or sys.stdout
    try:
        while True:
            steps, first = (first, None) if first else (feed.poll(), None)
            if steps:
                out.write("".join(text(row) + "\n" for row in rows(steps)))
                out.flush()
            if feed.ended:
                print(f"mcpbench: {feed.path}: {feed.ended}", file=sys.stderr, flush=True)
                return 0
            if not steps:
                time.sleep(POLL_SECONDS)
    except BrokenPipeError:
        # The reader left (`| head`): done. Python would complain flushing stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        return 0
