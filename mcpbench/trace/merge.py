"""Several traces into one: the recordings of one test (each stdio process a trace of its own, the
sessions a recorded mock forwarded) become the one trace it replays.

Events are read complete (`TraceReader`: version-2 HTTP events expanded, a spool read on) and written
again in order, source after source, by one `TraceWriter`, which compacts HTTP events anew; each
event keeps its own session and transport. The result is written beside `out` and renamed over it.
"""

import os
from collections.abc import Sequence
from pathlib import Path

from mcpbench.protocol.errors import TraceError
from mcpbench.trace.compact import BOUNDS
from mcpbench.trace.format import FORMAT_VERSION, Kind
from mcpbench.trace.reader import TraceReader
from mcpbench.trace.writer import TraceWriter

# Header fields every writer sets itself.
OWN_HEADER = frozenset({"v", "ts", "session", "transport", "dir", "kind", "mcpbench", "started", BOUNDS})


def merge_traces(sources: Sequence[str | os.PathLike], out: str | os.PathLike) -> Path:
    """Write the events of `sources`, in order, as one trace at `out` (which may be one of them).

    The header is the first source's (its transport, command or upstream).

    Raises:
        TraceError: a source cannot be read, or `sources` is empty.
    """
    if not sources:
        raise TraceError(f"{out}: nothing to merge")
    readers = [TraceReader(path) for path in sources]
    first = readers[0]
    events = iter(first)
    header = next(events)  # the reader raises for a file without one
    out = Path(out)
    partial = out.with_name(f".{out.name}.merging")
    extra = {key: value for key, value in header.items() if key not in OWN_HEADER}
    writer = TraceWriter(partial, transport=header.get("transport") or "stdio", header=extra)
    try:
        for reader, stream in [(first, events), *((reader, iter(reader)) for reader in readers[1:])]:
            lines = [writer.encode_flow_event({**event, "v": FORMAT_VERSION}, text=False)
                     for event in stream if event.get("kind") != Kind.TRACE]
            if lines:
                writer.write_lines(lines)
    except BaseException:
        writer.close()
        partial.unlink(missing_ok=True)
        raise
    writer.close()
    if writer.failed:
        partial.unlink(missing_ok=True)
        raise TraceError(writer.failed)
    os.replace(partial, out)
    return out
