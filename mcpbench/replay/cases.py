"""A replay or diff `Report` as a CI suite: a test case per trace, or per recorded call.

Per trace (the default): one case, failed when any call changed, went missing, appeared or
failed, its message the count and its body every changed path, old → new; its output each call's
latency beside the recorded one. Per call: a case each, skipped for calls not sent (another era)
or answered on neither side. A replay the target broke off is an error.
"""

from mcpbench.ci.cases import ERROR, FAILED, PASSED, SKIPPED, Case, Suite
from mcpbench.replay.report import CHANGES, COUNTED, CallResult, Report, change_lines, changed, render_changes

PER = ("trace", "call")  # also spelled in replay/cli.py's choices


def _latency(call: CallResult, before: str) -> str:
    def ms(seconds: float | None) -> str:
        return "—" if seconds is None else f"{seconds * 1000:.1f} ms"

    return f"{ms(call.latency_new)} ({before} {ms(call.latency_old)})"


def report_suite(report: Report, per: str = "trace") -> Suite:
    """`report` as a suite named after its trace (see the module docstring)."""
    counts = report.counts()
    suite = Suite(report.source, time=report.elapsed or None,
                  stats={"calls": sum(counts[key] for key in COUNTED), **{key: counts[key] for key in COUNTED}},
                  notes=[*report.notes, *(note for session in report.sessions for note in session.notes)])
    classname = f"mcpbench.{report.kind}"
    before = "recorded" if report.kind == "replay" else "A"
    if per == "call":
        for session in report.sessions:
            for call in session.calls:
                status = FAILED if call.status in CHANGES else SKIPPED if call.status not in COUNTED else PASSED
                lines = change_lines(call)
                suite.cases.append(Case(f"session {session.id} #{call.index} {call.label}", f"{classname}.{_stem(report)}",
                                        status, message=f"{call.status}: {lines[0]}" if lines else call.status,
                                        detail="\n".join(lines), time=call.latency_new,
                                        output=f"latency {_latency(call, before)}"))
    else:
        bad = changed(report)
        status = FAILED if bad else PASSED
        output = "\n".join(f"session {s.id} #{c.index} {c.label}: {c.status}, {_latency(c, before)}"
                           for s in report.sessions for c in s.calls)
        suite.cases.append(Case(report.source, classname, status,
                                message=f"{len(bad)} of {suite.stats['calls']} call(s) changed" if bad else "",
                                detail=render_changes(report) if bad else "", time=report.elapsed or None, output=output))
    if report.aborted:
        suite.cases.append(Case(f"{report.kind} of {report.source}", classname, ERROR, message=report.aborted,
                                detail=report.aborted))
    return suite


def _stem(report: Report) -> str:
    """The trace's file name without its endings, as a classname part."""
    name = report.source.replace("\\", "/").rsplit("/", 1)[-1]
    return name.split(".", 1)[0] or name
