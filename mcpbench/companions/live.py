"""The live view of a recording in progress, opened by its recorder: `tee --live`, `record --live`.

The view is `mcpbench inspect --follow TRACE` in a child process drawn on the terminal the
recorder's stderr is on, its keys read from that terminal (when it is the controlling terminal):
a stdio tee's stdin and stdout are the session's pipes, so stderr's terminal is the one a person
can be at. Without one (a host that starts the tee from a desktop app: stderr goes to a log) one
line says how to watch from a second terminal, and the recording goes on.

`q` in the view closes it and the recording goes on; Ctrl-C in it is a Ctrl-C to the recorder's job,
as in any terminal (the view restores the terminal, then sends SIGINT to its process group). The
view dies with its recorder (SIGTERM on the recorder's death: the terminal is restored).
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

from mcpbench.system.processes import dying_with_parent, start, stop_process

# How long a view may take to restore the terminal and exit once asked to.
STOP_TIMEOUT = 5.0


def terminal() -> int | None:
    """A descriptor (read and write) of the terminal stderr is on, when it is this process's
    controlling terminal (keys can be read from it), else None."""
    try:
        os.tcgetpgrp(2)  # fails unless stderr is our controlling terminal
        return os.open(os.ttyname(2), os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None


class LiveView:
    """The view of the trace at `path`, once `open` found a terminal for it."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.proc: subprocess.Popen | None = None

    def open(self) -> bool:
        """Start the view on stderr's terminal; without one, say how to follow from another (False)."""
        tty = terminal()
        if tty is None:
            print(f"mcpbench: --live: stderr is not a terminal; watch from another one: mcpbench inspect --follow {self.path}",
                  file=sys.stderr, flush=True)
            return False
        try:
            self.proc = start(
                dying_with_parent([sys.executable, "-m", "mcpbench", "inspect", "--follow", str(self.path)], signal.SIGTERM),
                stdin=tty, stdout=tty, stderr=tty,
            )
        finally:
            os.close(tty)
        return True

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self) -> None:
        """Until the view is left (`q`)."""
        if self.proc is not None:
            self.proc.wait()

    def close(self) -> None:
        """Ask a view still open to leave (it restores the terminal), and wait for it, bounded."""
        if not self.running:
            return
        stop_process(self.proc, STOP_TIMEOUT)
