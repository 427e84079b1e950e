"""A recorder's spans and metrics, sent by a process beside it: `mcpbench export --follow`.
`record` and the proxies run mitmproxy's event loop, which must not wait on an OTLP endpoint nor
spend its time building spans: the companion follows the trace as it is written (the file is the
queue between them, so the recording never waits and never drops), and sends spans and serves
metrics from its own process. It runs in a session of its own (a Ctrl-C in the terminal reaches
the recorder, which stops and then ends the companion), and stops when its standard input ends:
the recorder closes it when its trace is complete, or dies, and the companion then reads the
trace to its end, sends the rest and says how it went on stderr.

A load run's steps go the same way, once the run is over (`send_samples`: `mcpbench export
--load-samples`): the load's layer cannot build spans itself.
"""

import os
import subprocess
import sys
from pathlib import Path

from mcpbench.companions.options import TelemetryOptions
from mcpbench.system.processes import start, stop_process
from mcpbench.protocol.errors import OutputError
from mcpbench.trace.compress import GZIP_SUFFIX, ZSTD_SUFFIX

# How long the recorder waits for its companion to send the rest (it gives the endpoint ~3 s,
# then reads the last of the trace).
STOP_SECONDS = 15.0


class Companion:
    """`mcpbench export --follow` on `trace`, beside the process that writes it.

    Example:
        companion = Companion(options, "s.jsonl").start()
        ...  # record
        companion.stop()
    """

    def __init__(self, options: TelemetryOptions, trace: str | os.PathLike) -> None:
        self.options = options
        self.trace = Path(trace)
        self.proc: subprocess.Popen | None = None

    @classmethod
    def check(cls, options: TelemetryOptions, trace: str | os.PathLike) -> "Companion | None":
        """The companion `options` ask for (None when they ask for nothing), its trace checked.

        Raises:
            OutputError: the trace is written compressed: it cannot be followed as it grows.
        """
        if not options.any:
            return None
        if str(trace).endswith((GZIP_SUFFIX, ZSTD_SUFFIX)):
            raise OutputError(f"{trace}: --otlp and --metrics follow the trace as it is written, which a compressed one cannot be; record to a .jsonl")
        return cls(options, trace)

    def start(self) -> "Companion":
        argv = [sys.executable, "-m", "mcpbench", "export", "--follow", "--until-eof", *self.options.argv(), str(self.trace)]
        self.proc = start(argv, stdin=subprocess.PIPE, start_new_session=True)
        return self

    def stop(self) -> int | None:
        """The trace is complete: let the companion send the rest and exit; its exit status."""
        proc = self.proc
        if proc is None:
            return None
        self.proc = None
        proc.stdin.close()  # the companion's signal to send the rest and exit
        return stop_process(proc, STOP_SECONDS, signals=())


# How long a load run waits for its samples to be sent (a million steps take about a minute).
SAMPLES_SECONDS = 600.0


def send_samples(options: TelemetryOptions, samples: str | os.PathLike) -> int:
    """A finished load run's steps as spans (`mcpbench export --load-samples`, which says how it
    went on stderr); its exit status (3: the endpoint did not take them, or took too long)."""
    argv = [sys.executable, "-m", "mcpbench", "export", "--load-samples", *options.argv(), str(samples)]
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, timeout=SAMPLES_SECONDS).returncode
    except subprocess.TimeoutExpired:
        print(f"mcpbench: OTLP: the samples were not all sent within {SAMPLES_SECONDS:.0f} s", file=sys.stderr, flush=True)
        return 3
