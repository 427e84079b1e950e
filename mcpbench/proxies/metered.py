"""Spans and metrics of the traffic through a proxy that does not record it (the balancer, the faults).

With `--metrics` or `--otlp`, the recording addon goes first in the proxy's chain and writes the
traffic into a temporary trace, which the telemetry companion (`companions/telemetry.py`) follows,
as it follows `mcpbench record`'s: the counts come from the same trace reader and session as
every command's. The trace is deleted when the proxy stops.
"""

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mcpbench.companions.options import TelemetryOptions
from mcpbench.companions.telemetry import Companion


@contextlib.contextmanager
def metered(master, options: TelemetryOptions) -> Iterator[None]:
    """Record `master`'s traffic for `options` while the block runs (nothing when they ask for nothing).

    Call before the proxy's own addons are added: the recorder must see each flow first.
    """
    if not options.any:
        yield
        return
    from mcpbench.record.addon import make_addons

    with tempfile.TemporaryDirectory(prefix="mcpbench-metered-") as folder:
        trace = Path(folder) / "traffic.jsonl"
        master.addons.add(*make_addons())
        master.options.update(mcpbench_out=str(trace))  # the trace exists from here on
        companion = Companion(options, trace).start()
        try:
            yield
        finally:
            companion.stop()
