"""Stdio recordings of the reference server: the SDK session of mcpbench.lab.peers.drive through the tee.

In both eras: `mode="legacy"` (2025-11-25 handshake) and `mode="auto"` (2026-07-28 against this server).
The root conftest makes one per era per test session (`recordings`).
"""

import subprocess
import sys
from pathlib import Path
from typing import Final

from mcpbench.lab.peers.drive import drive
from tests.support.servers import serve_argv, stdio_params

MODES: Final = ("legacy", "auto")


def tee_argv(out: Path, server_argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "mcpbench", "tee", "--out", str(out), "--", *server_argv]


def record(out: Path, mode: str) -> Path:
    """Record one session of the reference server over stdio through the tee (bounded by the driver)."""
    drive(stdio_params(tee_argv(out, serve_argv("stdio"))), mode)
    assert out.exists() and out.stat().st_size > 0
    return out


def stdio_target() -> str:
    """The reference server as a replay TARGET string."""
    return "stdio:" + subprocess.list2cmdline(serve_argv("stdio"))
