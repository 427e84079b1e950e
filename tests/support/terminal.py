"""A real terminal for tests: a detached tmux session on a server of its own, read with capture-pane.

Every wait polls the screen, bounded in time; a failed wait shows the screen it last read.
"""

import contextlib
import os
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcpbench.lab.peers.servers import REPO_ROOT

# How often the screen is read while a test waits for it.
POLL_SECONDS = 0.05
WAIT_SECONDS = 30.0

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")


class Terminal:
    """One tmux pane running a command; its exit status lands in a file, the shell stays to show
    the terminal as the command left it (`stty` settings written beside it)."""

    def __init__(self, folder: Path, width: int, height: int) -> None:
        self.socket = f"mcpbench-test-{uuid.uuid4().hex[:8]}"
        self.status_file = folder / f"{self.socket}.status"
        self.stty_file = folder / f"{self.socket}.stty"
        self.width, self.height = width, height

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10, check=True).stdout

    def start(self, argv: list[str]) -> None:
        script = (  # job control (`set -m`), as an interactive shell: the command is the terminal's foreground job
            f"set -m; cd {shlex.quote(str(REPO_ROOT))}; {shlex.join(argv)}; echo $? > {shlex.quote(str(self.status_file))}.tmp; "
            f"stty -a > {shlex.quote(str(self.stty_file))}; mv {shlex.quote(str(self.status_file))}.tmp {shlex.quote(str(self.status_file))}; "
            "echo SHELL-AGAIN; exec sleep 600"
        )
        # The window's size is the terminal's: COLUMNS and LINES (an xdist worker has 80x24) would override it.
        env = {key: value for key, value in os.environ.items() if not key.startswith("TMUX") and key not in ("COLUMNS", "LINES")}
        subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d", "-x", str(self.width), "-y", str(self.height),
             "-s", "t", "sh", "-c", script],
            env={**env, "TERM": "xterm-256color"}, check=True, timeout=10,
        )

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", "t")  # -J: a wrapped line as one

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def wait_for(self, check: str | Callable[[str], bool], timeout: float = WAIT_SECONDS) -> str:
        """The screen once it shows `check` (a text, or a predicate of the screen)."""
        test = (lambda screen: check in screen) if isinstance(check, str) else check
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if test(screen):
                return screen
            time.sleep(POLL_SECONDS)
        pytest.fail(f"the terminal did not show {check!r} within {timeout:g} s; it shows:\n{screen}")

    def status(self, timeout: float = WAIT_SECONDS) -> int:
        """The command's exit status, once it has exited."""
        deadline = time.monotonic() + timeout
        while not self.status_file.exists():
            if time.monotonic() > deadline:
                pytest.fail(f"the command did not exit within {timeout:g} s; the terminal shows:\n{self.screen()}")
            time.sleep(POLL_SECONDS)
        return int(self.status_file.read_text())

    def restored(self) -> bool:
        """Whether the command left the terminal as a shell wants it: line editing and echo on."""
        settings = self.stty_file.read_text().split()
        return "icanon" in settings and "echo" in settings

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


@contextlib.contextmanager
def terminal(folder: Path, argv: list[str], width: int = 160, height: int = 48) -> Iterator[Terminal]:
    """`argv` running in a fresh tmux terminal of `width` x `height`, killed with its server at the end."""
    term = Terminal(folder, width, height)
    term.start(argv)
    try:
        yield term
    finally:
        term.close()
