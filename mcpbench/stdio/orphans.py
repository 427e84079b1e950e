"""A server started by the tee dies with the tee, even when the tee is killed outright.

The kernel sends a child a chosen signal when its parent dies once the child has
asked with `prctl(PR_SET_PDEATHSIG)`. That call must run in the child, but
`preexec_fn` is unsafe in a process that has threads, so the child first runs a
small stub (`python -I -S -c`) that makes the call, checks its parent is still
the tee (it may have died before the call), restores the signals Python's start
set aside, and execs the server: same pid, file descriptors and signal mask.
The stub costs a bare interpreter start (~10-20 ms), once per server.
"""

import os
import shutil
import signal
import sys

PR_SET_PDEATHSIG = 1

STUB = (
    "import ctypes, os, signal, sys\n"
    f"ctypes.CDLL(None, use_errno=True).prctl({PR_SET_PDEATHSIG}, int(sys.argv[2]), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(128 + int(sys.argv[2]))  # the parent died before prctl: as if the signal came\n"
    "for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # ignored by Python's start, not by the server's\n"
    "    signal.signal(sig, signal.SIG_DFL)\n"
    "try:\n"
    "    os.execvp(sys.argv[3], sys.argv[3:])\n"
    "except OSError as exc:\n"
    "    sys.stderr.write(f'mcpbench: cannot start {sys.argv[3]}: {exc.strerror}\\n')\n"
    "    os._exit(127)\n"
)


def dying_with_parent(argv: list[str], sig: int = signal.SIGKILL) -> list[str]:
    """The command line that runs `argv` so that it gets `sig` (SIGKILL: it is killed) when this process dies."""
    return [sys.executable, "-I", "-S", "-c", STUB, str(os.getpid()), str(int(sig)), *argv]


def findable(command: str) -> bool:
    """Whether `command` names an executable (a path, or a name on PATH) that exec could start."""
    return shutil.which(command) is not None
