"""How a sticky cell of each shape is judged (lab/experiments/sticky.py's CellResult), wherever it ran:
the sticky module's own cells (test_sticky.py) and the main job's (test_sticky_in_the_main_job.py)."""

from collections.abc import Callable


def broken(result) -> float:
    assert result.sessions >= 5, f"{result.cell.slug}: too few sessions to judge ({result.sessions})"
    return result.failed_sessions / result.sessions


def legacy_sse_spread_breaks(result) -> None:
    assert broken(result) > 0.5, result.forms
    assert result.sessions_by_class["session-not-found"] == result.failed_sessions
    assert any("HTTP 404" in form for form in result.forms)


def kept_on_one_instance(result) -> None:
    assert broken(result) == 0, (result.cell.policy, result.forms)
    assert result.first_instance_share == 1.0


def stateful_streamable_http_loses_sessions(result) -> None:
    assert broken(result) > 0.5, (result.cell.mode, result.forms)
    assert set(result.sessions_by_class) == {"session-not-found"}
    assert any("HTTP 404" in form and "Session not found" in form for form in result.forms)


def passes_without_stickiness(result) -> None:
    assert broken(result) == 0, (result.cell.mode, result.forms)
    assert result.first_instance_share < 1.0  # requests really were spread over the instances


# (mode, policy) -> what a cell of that shape must show, on any balancer, 3 instances
JUDGED: dict[tuple[str, str], Callable[[object], None]] = {
    ("legacy-sse", "round-robin"): legacy_sse_spread_breaks,  # legacy SSE needs stickiness
    ("legacy-sse", "sticky"): kept_on_one_instance,
    ("legacy-sse", "source"): kept_on_one_instance,
    ("stateful-sse", "round-robin"): stateful_streamable_http_loses_sessions,
    ("stateful-json", "random"): stateful_streamable_http_loses_sessions,
    ("stateless", "round-robin"): passes_without_stickiness,
    ("2026-07-28", "random"): passes_without_stickiness,
}
# The built-in balancer's shapes the main job's sticky stage runs as well (scenarios/sticky-short.yaml,
# 3 instances): judged from its run, not run again.
IN_THE_MAIN_JOB = (("legacy-sse", "round-robin"), ("legacy-sse", "sticky"), ("stateful-sse", "round-robin"), ("stateless", "round-robin"))
