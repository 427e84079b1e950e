"""A trace's spool: the raw bytes its recorder has taken but not yet written as events.

The stdio tee appends what it copies to `<trace>.spool` before forwarding it, and its recorder
turns that into the trace's events (see `stdio/recorder.py`). A spool outlives its trace's
completion only when the tee and its recorder were killed together; `finish` then completes the
trace from it. The trace reader calls it, so every command reads complete traces.
"""

import os
from pathlib import Path

SUFFIX = ".spool"


def spool_path(trace: str | os.PathLike) -> Path:
    return Path(f"{os.fspath(trace)}{SUFFIX}")


def finish(trace: str | os.PathLike) -> bool:
    """Complete `trace` from a spool left beside it by a killed recorder; True if it did.

    A spool still held by a running tee or recorder is left alone (the recording is live), and
    so is one that cannot be written back (a read-only trace is read as it is).
    """
    spool = spool_path(trace)
    if not spool.exists():
        return False
    from mcpbench.stdio.recorder import recover  # the one kind of spool there is

    try:
        return recover(Path(trace), spool)
    except OSError:
        return False
