"""One trace for several recording processes: tees that share an `--out` each add their sessions to it.

Hosts start a stdio server once per session (some once per tool call, some once for a version probe
and again for the calls), each through its own `mcpbench tee --out F`: every one of them must add
to `F`, never replace it, at the same time too. The rule:

- The *owner* of `F` is the one recording that holds the exclusive `flock` on `.F.lock` beside it
  (the tee and its recorder process, which inherits the descriptor: the claim lasts until both are
  gone). It records straight into `F`, appending to what is there (`TraceWriter(append=True)`),
  with its spool `F.spool` beside it as a single recording has: a kill of its whole tree loses
  nothing (`trace/spool.py`, which tells its session's lines from the others').
- Any other recording at the same time (the claim is held) records a *part* of its own,
  `.F.<id>.part.jsonl`, with its own spool, while holding an exclusive `flock` on it; once its
  recorder has written it complete, its tee adds the part's events to `F` (`add_part`: one
  `O_APPEND` write of whole lines into a plain trace, which never tears another writer's line; a
  compressed or missing `F` is written anew under the owner's claim) and deletes it.
- A part whose tee was killed stays on disk, complete or completed from its spool; the next owner
  of `F` (a tee starting, or `mcpbench trace finish F`) adds it (`fold`). Nothing recorded is lost.

Events carry their own session, so sessions appended side by side read as recorded; each session's
own lines keep their order.
"""

import fcntl
import os
import re
from pathlib import Path

from mcpbench.protocol.errors import TraceError
from mcpbench.trace import spool
from mcpbench.trace.compress import GZIP_MAGIC, ZSTD_MAGIC
from mcpbench.trace.merge import merge_traces

PART_SUFFIX = ".part.jsonl"

# How much of a part is read at once when its events are added to a plain trace.
READ_BYTES = 1024 * 1024


def lock_path(trace: str | os.PathLike) -> Path:
    path = Path(trace)
    return path.with_name(f".{path.name}.lock")


def part_path(trace: str | os.PathLike, tag: str) -> Path:
    """The part a recording that does not own `trace` writes (`tag`: its own, unique)."""
    path = Path(trace)
    return path.with_name(f".{path.name}.{tag}{PART_SUFFIX}")


def parts(trace: str | os.PathLike) -> list[Path]:
    """The parts beside `trace`, oldest first."""
    path = Path(trace)
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[0-9a-f]+{re.escape(PART_SUFFIX)}")
    try:
        found = [entry for entry in path.parent.iterdir() if pattern.fullmatch(entry.name)]
    except OSError:
        return []
    return sorted(found, key=lambda entry: entry.stat().st_mtime if entry.exists() else 0)


def claim(trace: str | os.PathLike, *, wait: bool = False) -> int | None:
    """Own `trace`: the descriptor holding its claim (close it to give it up), or None when another
    recording owns it (with `wait`, wait for it instead). Inherited by a forked recorder.

    Raises:
        TraceError: the lock file cannot be created (the folder is not writable).
    """
    path = lock_path(trace)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # inherited across fork; not across exec
        os.set_inheritable(fd, False)
    except OSError as exc:
        raise TraceError(f"{trace}: cannot create its lock {path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def hold(part: Path) -> int:
    """Hold `part` while its recording runs (a `fold` leaves it alone): the descriptor to close after."""
    fd = os.open(part, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def appendable(trace: str | os.PathLike) -> bool:
    """Whether `trace` is a plain (uncompressed) trace file with something in it: one a writer appends to."""
    if not os.path.isfile(trace):  # a device or a pipe (`--out /dev/full`) is written as it is
        return False
    try:
        with open(trace, "rb") as handle:
            start = handle.read(8)
    except OSError:
        return False
    return bool(start) and not start.startswith((GZIP_MAGIC, ZSTD_MAGIC))


def add_part(part: Path, trace: Path, *, owned: bool = False) -> None:
    """Add the events of the complete `part` to `trace`, then delete the part.

    A plain trace gets them with `O_APPEND` writes of whole lines, beside whatever its owner is
    writing; a missing or compressed one is written anew, under the owner's claim (`owned`: the
    caller holds it; else this waits for it).

    Raises:
        TraceError: `part` cannot be read or `trace` written; the part is kept.
    """
    if appendable(trace):
        _append(part, trace)
    else:
        fd = None if owned else claim(trace, wait=True)
        try:
            if appendable(trace):  # its owner made it meanwhile
                _append(part, trace)
            elif os.path.exists(trace) and os.path.getsize(trace):
                merge_traces([trace, part], trace)
            else:
                merge_traces([part], trace)
        finally:
            if fd is not None:
                os.close(fd)
    part.unlink(missing_ok=True)


def _append(part: Path, trace: Path) -> None:
    try:
        with open(part, "rb") as source:
            source.readline()  # the part's header: the trace has its own
            out = os.open(trace, os.O_RDWR | os.O_APPEND)
            try:
                size = os.fstat(out).st_size
                # A line a killed writer tore stays a line of its own: ours must not be glued to it.
                if size and os.pread(out, 1, size - 1) != b"\n":
                    os.write(out, b"\n")
                rest = b""
                while block := source.read(READ_BYTES):
                    block = rest + block
                    cut = block.rfind(b"\n") + 1  # whole lines only in each write
                    rest = block[cut:]
                    if cut:
                        _write_all(out, block[:cut])
                if rest:
                    _write_all(out, rest + b"\n")
            finally:
                os.close(out)
    except OSError as exc:
        raise TraceError(f"{trace}: cannot add the sessions of {part}: {exc.strerror}") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def fold(trace: str | os.PathLike) -> list[Path]:
    """Add every part that a killed recording left beside `trace` (its spool's rest too); the parts added.

    Call as the owner of `trace`. A part still being recorded (held, or its spool live) is left alone.
    """
    added = []
    for part in parts(trace):
        try:
            fd = os.open(part, os.O_RDONLY)
        except OSError:
            continue  # added by its own tee meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its tee runs
            if spool.live(part) or not part.exists():
                continue
            spool.finish(part)
            add_part(part, Path(trace), owned=True)
            added.append(part)
        finally:
            os.close(fd)
    return added
