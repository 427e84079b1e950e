"""The command a recording test's stdio client starts: `mcpbench tee` into the next free part file.

    python -m mcpbench.testing.record_stdio PARTS_DIR -- python -m my_server

A test may start its stdio server more than once, and each start is a tee of its own; each records
to a new `PARTS_DIR/NNNN.jsonl` (taken with O_EXCL: starts at the same moment never share one),
which the fixture merges into the test's trace when the test ends. The tee then replaces this
process (`exec`), so the client talks to the tee as it would to the server.
"""

import os
import sys
from pathlib import Path

# Part files one test may make: far more server starts than a test makes.
MAX_PARTS = 10_000


def claim(folder: Path) -> Path:
    """Create and return the next free part file in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(MAX_PARTS):
        path = folder / f"{number:04d}.jsonl"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            continue
        return path
    raise SystemExit(f"mcpbench: {folder}: {MAX_PARTS} recordings already; clean the folder")


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        raise SystemExit("usage: python -m mcpbench.testing.record_stdio PARTS_DIR -- COMMAND [ARGS...]")
    part = claim(Path(argv[0]))
    os.execv(sys.executable, [sys.executable, "-m", "mcpbench", "tee", "--out", str(part), "--", *argv[2:]])


if __name__ == "__main__":
    main(sys.argv[1:])
