"""Where whole-file outputs go: a fresh folder per run, and files that appear whole or not at all.

Two runs started in the same second get two folders (`mkdir` without `exist_ok` is the lock), and a
report, chart or summary is written beside its final name and renamed into place, so a reader never
sees half a file and a crash never leaves one where a good one was.
"""

import contextlib
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from mcpbench.protocol.errors import OutputError

# More runs than this with the same label in the same second means something is looping.
MAX_SAME_SECOND: Final = 1000


def new_run_folder(parent: Path, label: str) -> Path:
    """Create and return `parent/<UTC time>-<label>`, suffixed `-2`, `-3`, … if that exists."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in label) or "run"
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, MAX_SAME_SECOND + 1):
        folder = parent / (f"{stamp}-{safe}" if n == 1 else f"{stamp}-{safe}-{n}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise FileExistsError(f"{parent}: {MAX_SAME_SECOND} run folders named {stamp}-{safe} already")


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success rename it onto `path`, on failure remove it.

    Example: `with atomic_path(out / "chart.png") as tmp: figure.savefig(tmp, format="png")`
    (pass the format: the temporary name's suffix is not the final one).

    A symlink is followed (its target is replaced, the link stays); a path that is not a regular
    file (/dev/stdout, a FIFO) is written in place: renaming onto it would replace the device.
    """
    final = Path(os.path.realpath(path))
    if final.exists() and not final.is_file():
        yield final
        return
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_atomic(path: Path | str, data: bytes) -> None:
    """Write `data` to `path` whole: readers see the old file or the new one, never a part."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def refuse_overwrite(
    outputs: Iterable[tuple[str, str | os.PathLike | None]],
    inputs: Iterable[tuple[str, str | os.PathLike | int | None]] = (),
) -> None:
    """Refuse, before anything is written, an output that names an input or another output.

    Each entry is (what the user called it, path); None paths are skipped; an input may be an open
    file descriptor (the session's own stdout). Paths are compared as files (hard links and symlinks
    included) when they exist, else by their resolved names.

    Raises:
        OutputError: naming both options and the path.
    """
    inputs = [(name, path) for name, path in inputs if path is not None and path != ""]
    seen: list[tuple[str, str | os.PathLike]] = []
    for name, path in outputs:
        if not path:
            continue
        for other_name, other in (*inputs, *seen):
            if _same_file(path, other):
                raise OutputError(f"{name} {path} is also {other_name}: refusing to write over it; choose another path")
        seen.append((name, path))


def _same_file(a: str | os.PathLike, b: str | os.PathLike | int) -> bool:
    """Whether `a` names the file `b` is (a path, or an open file descriptor)."""
    try:
        return os.path.samestat(os.stat(a), os.stat(b))
    except OSError:  # one of them does not exist (yet)
        return not isinstance(b, int) and Path(a).resolve() == Path(b).resolve()
