"""Server code against its recordings: replay a trace against the server under test, fail on any change.

    from mcpbench.testing import replay_trace

    def test_server_answers_as_recorded():
        replay_trace("tests/mcp_traces/session.jsonl", "stdio:python -m my_server")

`replay_trace` raises `ReplayChanged`, an `AssertionError` whose message names each changed call and
path, old → new, so pytest shows it as the test's failure. The rules kept beside the trace apply:
learned noise (`TRACE.noise.json`, written when `learn_noise=True`) and hand-written rules
(`TRACE.ignore`, one a line). Latency is not judged unless asked (`latency=(factor, slack_s)`): a
test suite's machine is often busy.
"""

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mcpbench.protocol.errors import TargetError

if TYPE_CHECKING:
    from mcpbench.auth.options import ClientOptions


class ReplayChanged(AssertionError):
    """The live server answered differently from the recording; `report` holds every call."""

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report


def replay_trace(trace: str | os.PathLike, target: str, *, ignore: Sequence[str] = (), learn_noise: bool = False,
                 protocol_version: str | None = None, timeout: float = 30.0, pace: str = "fast",
                 latency: tuple[float, float] | None = None, out: str | os.PathLike | None = None,
                 client: "ClientOptions | None" = None):
    """Replay `trace` against `target` (`stdio:CMD`, `http(s)://…/mcp`, `sse+http(s)://…/sse`).

    `client`: the headers, bearer token, OAuth and proxy a protected target needs
    (`mcpbench.auth.ClientOptions(bearer_token_env="MCP_TOKEN")`, say); recorded credentials are
    hashed in traces and never replayed.

    Returns:
        The replay's `Report` when nothing changed.

    Raises:
        ReplayChanged: a call changed, went missing, appeared or failed (the message says which, and where).
        McpbenchError: the trace cannot be read (TraceError), the target is written wrongly or cannot
            be reached, started, or kept alive (TargetError): one line each.
    """
    from mcpbench.replay import plan as plans
    from mcpbench.replay.engine import Pace
    from mcpbench.replay.report import Judging, render_changes
    from mcpbench.replay.suite import ReplayOptions, noise_path, replay_one, rules_for
    from mcpbench.system.target import parse_target

    parsed = parse_target(target)
    recorded = plans.load(trace)
    access = client.resolve(parsed.url) if client is not None else None
    options = ReplayOptions(protocol_version=protocol_version, pace=Pace.parse(pace), timeout=timeout, access=access)
    outcome = replay_one(recorded, parsed, Judging(rules_for(trace, ignore), latency=latency), options,
                         learn_to=noise_path(trace) if learn_noise else None, out=out)
    report = outcome.report
    if report.aborted:
        raise TargetError(f"replay of {trace} against {target}: {report.aborted}")
    if report.changed:
        raise ReplayChanged(render_changes(report), report)
    return report
