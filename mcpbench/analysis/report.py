"""`mcpbench report PATH…`: one self-contained `report.html` from traces, load runs, replay reports and lab runs.

Three steps, each testable alone: `collect` finds what the paths hold and loads
it with the public loaders; `headlines`, `findings` and the section builders turn
frames into tables, charts (the plot functions of `charts.py`) and session
timelines (`timeline.py`); `render` writes one HTML page (its building blocks in
`page.py`) with every chart embedded as a PNG data URI, no script and no network
fetch, so the page opens from disk anywhere. The page opens with what went wrong,
worst first, each linked to where it is; every section opens with a sentence on
what it shows and what would be wrong.
"""

import html
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pandas as pd

from mcpbench.analysis import page
from mcpbench.analysis.probe import load_probe, probe_line
from mcpbench.analysis.results import LabRun, LoadRun, ReplayReport, load_lab, load_replay, load_run
from mcpbench.analysis.tables import latency_table, outcome_table
from mcpbench.analysis.timeline import outside, outside_anchor, session_anchor
from mcpbench.analysis.traces import TraceFrames, load_trace
from mcpbench.capacity.analysis import verdict_line as capacity_line
from mcpbench.compare.chart import headline as compare_headline
from mcpbench.compare.judge import BETWEEN_RUNS
from mcpbench.compare.judge import read_json as read_compare
from mcpbench.files.outputs import write_atomic
from mcpbench.protocol.errors import McpbenchError
from mcpbench.protocol.reconnect import NONE

REPORT_NAME = "report.html"
TRACE_SUFFIXES = (".jsonl", ".jsonl.gz")
# A run folder holds its parts a level or two down (load/, lab/); deeper is not ours.
SCAN_DEPTH = 2


@dataclass
class Inputs:
    """What the paths held, loaded."""

    traces: TraceFrames | None = None
    trace_files: list[Path] = field(default_factory=list)
    loads: list[LoadRun] = field(default_factory=list)
    replays: list[ReplayReport] = field(default_factory=list)
    labs: list[LabRun] = field(default_factory=list)
    probes: list[dict] = field(default_factory=list)  # `mcpbench probe --json` files, as written
    compares: list[dict] = field(default_factory=list)  # `mcpbench compare`'s compare.json files, as written
    demonstrations: dict[str, str] = field(default_factory=dict)  # file name -> why its failure is the point (DEMONSTRATIONS)
    sources: list[str] = field(default_factory=list)


def collect(paths: Iterable[str | os.PathLike]) -> Inputs:
    """Load every trace, load run, replay report and lab run the paths are or hold.

    Raises:
        McpbenchError: a path is missing or holds nothing a report can show (names it).
    """
    inputs = Inputs()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise McpbenchError(f"{path}: no such file or folder")
        found = _count(inputs)
        _take(path, inputs, SCAN_DEPTH)
        if _count(inputs) == found:
            raise McpbenchError(f"{path}: not a trace, load run, replay report, probe, comparison, lab run or run folder")
        inputs.sources.append(str(path))
    if inputs.trace_files:
        inputs.traces = load_trace(inputs.trace_files)
    return inputs


def _count(inputs: Inputs) -> int:
    return len(inputs.trace_files) + len(inputs.loads) + len(inputs.replays) + len(inputs.labs) + len(inputs.probes) + len(inputs.compares)


def _take(path: Path, inputs: Inputs, depth: int) -> None:
    if path.is_file():
        if path.name == DEMONSTRATIONS:
            inputs.demonstrations.update(_demonstrations(path))
        elif path.name.endswith(TRACE_SUFFIXES) and not path.name.startswith("samples"):
            inputs.trace_files.append(path)
        elif path.suffix == ".json" and (probe := load_probe(path)) is not None:
            inputs.probes.append(probe)
        elif path.suffix == ".json" and (comparison := read_compare(path)) is not None:
            inputs.compares.append(comparison)
        elif path.suffix == ".json" and _is_replay_report(path):
            inputs.replays.append(load_replay(path))
        return
    if (path / "samples.jsonl").is_file():
        inputs.loads.append(load_run(path))
        return
    if (path / "sticky.csv").is_file() or (path / "reconnect.csv").is_file():
        inputs.labs.append(load_lab(path))
    if depth > 0:
        for child in sorted(path.iterdir()):
            if child.name.startswith(".") or child.name == REPORT_NAME:
                continue
            if child.is_dir() or child.name.endswith(TRACE_SUFFIXES) or child.suffix == ".json":
                _take(child, inputs, depth - 1)


def _demonstrations(path: Path) -> dict[str, str]:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise McpbenchError(f"{path}: not a JSON object of file names and reasons ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise McpbenchError(f"{path}: not a JSON object of file names and reasons")
    return data


def _is_replay_report(path: Path) -> bool:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(data, dict) and "sessions" in data and "counts" in data and "trace" in data


# ---------------------------------------------------------------------------------------------- figures


def headlines(inputs: Inputs) -> list[str]:
    """A few lines of the figures that matter, one per kind of input present."""
    lines = []
    if inputs.traces is not None:
        calls = inputs.traces.calls
        latency = calls["latency_ms"].dropna()
        outcomes = calls["outcome"].value_counts()
        not_ok = ", ".join(f"{n} {k}" for k, n in outcomes.items() if k != "ok" and n) or "none"
        lines.append(
            f"traces: {len(inputs.trace_files)} files, {len(inputs.traces.sessions)} sessions, {len(calls)} calls "
            f"(p50 {_ms(latency.quantile(0.5))}, p95 {_ms(latency.quantile(0.95))}), not ok: {not_ok}, "
            f"{len(inputs.traces.violations)} violations"
        )
    if inputs.loads:
        count = sum(int(run.summary.get("total", {}).get("count", len(run.samples))) for run in inputs.loads)
        failures = sum(int(run.summary.get("total", {}).get("failures", 0)) for run in inputs.loads)
        samples = pd.concat([run.samples for run in inputs.loads])["latency_ms"].dropna()
        lines.append(
            f"load: {len(inputs.loads)} runs, {count} calls, {failures} failed "
            f"(p50 {_ms(samples.quantile(0.5))}, p95 {_ms(samples.quantile(0.95))})"
        )
    if inputs.replays:
        counts: dict[str, int] = {}
        for report in inputs.replays:
            for key, value in report.counts.items():
                counts[key] = counts.get(key, 0) + value
        changed = sum(counts.get(k, 0) for k in ("changed", "missing", "extra", "failed"))
        lines.append(f"replay: {len(inputs.replays)} replays, {counts.get('identical', 0)} calls identical, {changed} changed")
    for probe in inputs.probes:
        lines.append(probe_line(probe))
    for comparison in inputs.compares:
        lines.append("compare: " + compare_headline(comparison))
    for folder, result in _capacities(inputs.loads):
        lines.append(f"capacity ({folder.name}): {capacity_line(result)}")
    reconnects = [lab.reconnect for lab in inputs.labs if lab.reconnect is not None]
    if reconnects:
        lines.append("reconnect: " + reconnect_line(pd.concat(reconnects)))
    if any(not lab.sticky.empty for lab in inputs.labs):
        sticky = pd.concat([lab.sticky for lab in inputs.labs if not lab.sticky.empty])
        worst = sticky.loc[(sticky["failed_sessions"] / sticky["sessions"].where(sticky["sessions"] > 0)).fillna(0).idxmax()] if len(sticky) else None
        if worst is not None:
            share = 100.0 * worst["failed_sessions"] / worst["sessions"] if worst["sessions"] else 0.0
            lines.append(f"lab: {len(sticky)} sticky cells; worst {worst['mode']} / {worst['policy']}: {int(worst['failed_sessions'])} of {int(worst['sessions'])} sessions failed ({share:.0f} %)")
    return lines


def reconnect_line(cells: pd.DataFrame) -> str:
    """Per policy: breaks recovered, time to recover, answers lost and duplicated."""
    parts = []
    for policy, rows in cells.groupby("policy", sort=False):
        p50 = rows["recover_p50_ms"].dropna()
        took = f" in ~{p50.median():.0f} ms" if len(p50) else ""
        parts.append(f"{policy} {int(rows['recovered_breaks'].sum())}/{int(rows['breaks'].sum())} breaks recovered{took}, "
                     f"{int(rows['lost'].fillna(0).sum())} lost, {int(rows['duplicated'].fillna(0).sum())} duplicated")
    return "; ".join(parts)


def _ms(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.1f} ms"


# ---------------------------------------------------------------------------------------------- findings


@dataclass
class PageFinding:
    """One thing a reader should look at first, and where on the page it is."""

    severity: str  # "bad": something failed; "warn": worth a look; "shown": a failure the run set out to show
    text: str
    href: str


# A run folder may name, in this file, its parts whose failures are what it was built to show (the main
# job's replay against a modified server): {"replay-modified.json": "why it must fail"}.
DEMONSTRATIONS = "demonstrations.json"


# Failed sessions listed one by one before they are summed up in one line.
MAX_SESSION_FINDINGS = 5


def findings(inputs: Inputs, drawn: set[int] | None = None) -> list[PageFinding]:
    """The worst first: violations, failed sessions, broken lab cells, lost answers, failed load
    calls, changed replays, failed probe checks; then what is only worth a look.

    Args:
        drawn: positions (in the sessions frame) of the sessions whose timeline the page draws:
            a failed session links to its timeline, else to its row of the sessions table.
    """
    out: list[PageFinding] = []
    drawn = drawn or set()
    if inputs.traces is not None:
        out += _trace_findings(inputs.traces, drawn)
    for index, lab in enumerate(inputs.labs):
        out += _lab_findings(lab, index)
    if inputs.loads:
        failed = sum(int(run.summary.get("total", {}).get("failures", 0)) for run in inputs.loads)
        total = sum(int(run.summary.get("total", {}).get("count", len(run.samples))) for run in inputs.loads)
        if failed:
            classes = pd.concat([run.samples for run in inputs.loads])["failure"].dropna().astype(str).value_counts()
            named = ", ".join(f"{name} ×{n}" for name, n in classes.head(4).items())
            out.append(PageFinding("bad", f"load: {failed} of {total} calls failed" + (f" ({named})" if named else ""), "#load-failures"))
    for report in inputs.replays:
        changed = {k: report.counts.get(k, 0) for k in ("changed", "missing", "extra", "failed") if report.counts.get(k, 0)}
        if changed:
            what = ", ".join(f"{n} {k}" for k, n in changed.items())
            why = inputs.demonstrations.get(report.path.name)
            out.append(PageFinding("shown", f"replay {report.path.name}: {what}, as it must: {why}", "#replays") if why else
                       PageFinding("bad", f"replay {report.path.name}: {what} against {report.target}", "#replays"))
    for index, probe in enumerate(inputs.probes):
        for verdict, severity in (("fail", "bad"), ("warn", "warn")):
            checks = [row["check"] for row in probe["checks"] if row["verdict"] == verdict]
            if checks:
                out.append(PageFinding(severity, f"probe {probe['probe']}: {verdict} on {', '.join(checks)}", f"#probe-{index}"))
    for index, comparison in enumerate(inputs.compares):
        worse = [step for step in comparison["steps"]
                 if step["verdict"] == "slower" or (step.get("errors") or {}).get("verdict") == "more errors"]
        # Over repeated runs a slower step is the build's; with one run a side, the two runs' (docs/compare.md).
        for runs, severity, said in ((True, "bad", "beyond noise"), (False, "warn", "between these two runs (one run a side)")):
            named = [f"{step['type']} {step['step']}" for step in worse if step.get("method", "").startswith(BETWEEN_RUNS) == runs]
            if named:
                out.append(PageFinding(severity, f"compare: slower or more errors {said} on {', '.join(named)}", f"#compare-{index}"))
    order = {"bad": 0, "warn": 1, "shown": 2}
    return sorted(out, key=lambda f: order[f.severity])  # stable: the kinds keep the order above


def _trace_findings(frames: TraceFrames, drawn: set[int]) -> list[PageFinding]:
    out = []
    violations = frames.violations
    if len(violations):
        codes = violations["code"].astype(str).value_counts()
        where = [page.counted(violations["session"].nunique(), "session")] + ["outside any session"] * bool(violations["session"].isna().any())
        named = ", ".join(f"{code} ×{n}" for code, n in codes.items())
        out.append(PageFinding("bad", f"{page.counted(len(violations), 'protocol violation')} in {' and '.join(where)}: {named}", "#violations"))
    sessions = frames.sessions
    failed = [i for i in range(len(sessions)) if sessions["errors"].iat[i] or sessions["unanswered"].iat[i]]
    for i in failed[:MAX_SESSION_FINDINGS]:
        row = sessions.iloc[i]
        what = ", ".join([page.counted(int(row["errors"]), "error")] * bool(row["errors"])
                         + [page.counted(int(row["unanswered"]), "call") + " without an answer"] * bool(row["unanswered"]))
        href = f"#{session_anchor(i)}" if i in drawn else f"#session-{i}"
        out.append(PageFinding("bad", f"session {_short_id(row['session'])} ({row['trace']}, {row['transport']}): {what}, "
                                  f"among its {page.counted(int(row['calls']), 'call')}", href))
    if len(failed) > MAX_SESSION_FINDINGS:
        more = page.counted(len(failed) - MAX_SESSION_FINDINGS, "more session")
        out.append(PageFinding("bad", f"and {more} with errors or calls without an answer", "#sessions"))
    for index, (trace, part) in enumerate(outside(frames)):
        outcomes = part["outcome"].astype(str)
        errors, unanswered = int(outcomes.isin(["error", "http-error"]).sum()), int((outcomes == "unanswered").sum())
        if errors or unanswered:
            what = ", ".join([page.counted(errors, "error")] * bool(errors) + [f"{unanswered} without an answer"] * bool(unanswered))
            out.append(PageFinding("bad", f"{page.counted(len(part), 'call')} outside any session ({trace}): {what}", f"#{outside_anchor(index)}"))
    for note in frames.notes:
        out.append(PageFinding("warn", note, "#trace-notes"))
    return out


def _lab_findings(lab: LabRun, index: int) -> list[PageFinding]:
    out = []
    if not lab.sticky.empty:
        # `expected` (written by the experiment since it has one) says which cells are built to break.
        expected = lab.sticky["expected"].astype(str) if "expected" in lab.sticky else pd.Series("", index=lab.sticky.index)
        for i, cell in lab.sticky.iterrows():
            name = f"sticky cell {cell['transport']} / {cell['mode']} / {cell['policy']} / {cell['balancer']} / {int(cell['instances'])} instances"
            failed, sessions = int(cell["failed_sessions"]), int(cell["sessions"])
            if failed and expected[i] == "break":
                out.append(PageFinding("shown", f"{name}: {failed} of {sessions} sessions failed, as designed: its balancer "
                                            f"spreads a session's requests over instances that each keep their own sessions", f"#lab-sticky-{index}"))
            elif failed:
                out.append(PageFinding("bad", f"{name}: {failed} of {sessions} sessions failed", f"#lab-sticky-{index}"))
            elif expected[i] == "break" and sessions:
                out.append(PageFinding("warn", f"{name}: no session failed, though its balancer spreads requests over "
                                           f"instances that keep their own sessions: is something in front sticky?", f"#lab-sticky-{index}"))
    if lab.reconnect is not None and {"lost", "duplicated", "policy"} <= set(lab.reconnect.columns):
        for policy, rows in lab.reconnect.groupby("policy", sort=False):
            lost, duplicated = int(rows["lost"].fillna(0).sum()), int(rows["duplicated"].fillna(0).sum())
            if (lost or duplicated) and policy == NONE:
                out.append(PageFinding("shown", f"reconnect policy {policy}: {lost} answers lost, {duplicated} duplicated, as designed: "
                                            f"the control recovers nothing", f"#lab-reconnect-{index}"))
            elif lost or duplicated:
                out.append(PageFinding("bad", f"reconnect policy {policy}: {lost} answers lost, {duplicated} duplicated", f"#lab-reconnect-{index}"))
    return out


def _short_id(key: object, chars: int = 12) -> str:
    text = str(key)
    return text if len(text) <= chars + 1 else text[:chars] + "…"


def _attention(found: list[PageFinding]) -> str:
    shown = [f for f in found if f.severity == "shown"]
    found = [f for f in found if f.severity != "shown"]
    return _first(found) + _shown(shown)


def _shown(shown: list[PageFinding]) -> str:
    if not shown:
        return ""
    items = "".join(f"<li><span class='sev shown'>shown</span> <a href='{f.href}'>{html.escape(f.text)}</a></li>" for f in shown)
    return (f"<div class=purpose id=shown><h2>Failing on purpose ({len(shown)})</h2>"
            f"<p class=lead>What the run was built to show failing; each links to where it is.</p><ul>{items}</ul></div>")


def _first(found: list[PageFinding]) -> str:
    if not found:
        return ("<div class='attention clear' id=attention><h2>Nothing to look at first</h2>"
                "<p>No protocol violations, failed sessions, broken lab cells, lost answers, failed load calls, "
                "changed replays or failed probe checks.</p></div>")
    items = "".join(f"<li><span class='sev {f.severity}'>{'failed' if f.severity == 'bad' else 'look'}</span>"
                    f" <a href='{f.href}'>{html.escape(f.text)}</a></li>" for f in found)
    return (f"<div class=attention id=attention><h2>Look at these first ({len(found)})</h2>"
            f"<p class=lead>The worst first; each links to where it is on this page.</p><ul>{items}</ul></div>")


# ---------------------------------------------------------------------------------------------- sections


def _trace_sections(frames: TraceFrames, drawn: list) -> list[str]:
    from mcpbench.analysis.charts import plot_latency_cdf, plot_latency_over_time
    from mcpbench.analysis.timeline import MAX_SESSIONS, render as render_timeline, session_anchor

    calls = frames.calls
    out = [
        page.section(
            "trace-latency", "Traces: latency per method and per tool",
            "How long each request waited for its answer (ms), per method and per tool: how many calls, the median (p50), "
            "p90, p99 and the slowest. A p99 far above its p50 is a slow tail; one tool far slower than the rest is worth a look.",
            "<h3>per method</h3>", page.table(latency_table(calls, by="method"), labels=page.LATENCY_LABELS, empty="no answered calls"),
            "<h3>per tool</h3>", page.table(latency_table(calls.dropna(subset=["tool"]), by="tool"), labels=page.LATENCY_LABELS, empty="no tool calls"),
        )
    ]
    if calls["latency_ms"].notna().any():
        out.append(page.section(
            "trace-charts", "Traces: latency per transport and era",
            "Each call's latency at the time it was sent, and the share of calls answered within each latency, one colour per "
            "transport and era. Look for latency climbing over time, a cluster of slow calls, or one transport's curve far right of the others.",
            page.chart(lambda ax: plot_latency_over_time(calls, ax)), page.chart(lambda ax: plot_latency_cdf(calls, ax)),
        ))
    outcomes = outcome_table(calls, by="method")
    if len(outcomes):
        outcomes = outcomes[[c for c in OUTCOME_ORDER if c in outcomes.columns] + [c for c in outcomes.columns if c not in OUTCOME_ORDER]]
    out.append(page.section(
        "trace-outcomes", "Traces: how calls ended, per method",
        "Calls per method by how they ended: answered (ok), a round asking for input (input-required, 2026-07-28), "
        "a tool's own error (tool-error), a JSON-RPC or HTTP error, or no answer at all. Errors and unanswered calls are what would be wrong.",
        page.table(outcomes, labels={"method": "method"}, empty="no calls"),
    ))
    violations = frames.violations
    by_code = violations.groupby("code", observed=True).size().rename("violations").to_frame() if len(violations) else None
    out.append(page.section(
        "violations", "Violations",
        "Messages that broke the protocol as the recorder saw them, by code and one by one. A correct run has none.",
        page.table(by_code, empty="none: every message followed the protocol"),
        page.table(violations, empty="") if len(violations) else "",
    ))
    sessions = frames.sessions
    shown = {t.anchor for t in drawn}
    session_cells = [page.Html(f"<a href='#{session_anchor(i)}' title='{html.escape(str(key), quote=True)}'>{html.escape(_short_id(key))}</a>")
                     if session_anchor(i) in shown else _short_id(key) for i, key in enumerate(sessions["session"])]
    table = pd.DataFrame({
        "trace": sessions["trace"], "session": session_cells, "transport": sessions["transport"],
        "protocol": _protocol(sessions), "calls": sessions["calls"], "errors": sessions["errors"],
        "tool_errors": sessions["tool_errors"], "unanswered": sessions["unanswered"], "violations": sessions["violations"],
        "handshake_ms": sessions["handshake_ms"], "start": sessions["start"],
        "duration_ms": (sessions["end"] - sessions["start"]).dt.total_seconds() * 1000.0,
        "client": _with_version(sessions, "client"), "server": _with_version(sessions, "server"),
    })
    failed = (sessions["errors"] + sessions["unanswered"] + sessions["violations"]).to_numpy() > 0
    order = sorted(range(len(sessions)), key=lambda i: not failed[i])  # those that went wrong first, else in their order
    out.append(page.section(
        "sessions", "Sessions",
        "One row per session: the client and server that spoke, the handshake's time, and how many calls ended in an error, "
        "a tool error or no answer. A session with errors, unanswered calls or violations is wrong: it comes first here and at the top of the page.",
        page.table(table.iloc[order].reset_index(drop=True), row_ids=[f"session-{i}" for i in order]),
    ))
    if drawn:
        idle = int((sessions["calls"] == 0).sum())
        count = len(_drawn_sessions(drawn, len(sessions)))
        told = (f"{count} of the {len(sessions)} sessions drawn: those that went wrong first, then the busiest, at most {MAX_SESSIONS}"
                + (f"; {page.counted(idle, 'session')} without calls left out. " if idle else ". ") if len(sessions) > count else "")
        if len(drawn) > count:
            told += "Calls outside any session are drawn on a timeline of their own per trace. "
        out.append(page.section(
            "timelines", "Session timelines",
            "Each session's calls as bars over time since its first event, one row per call (the rounds of a multi round-trip "
            "request share a row); the colour says how it ended and diamonds mark progress notifications. Red or grey bars "
            "(errors, answers that never came), a bar far longer than its neighbours, or a long gap are what to look for.",
            f"<p class=note>{told}Hover over a bar for its details.</p>",
            *(render_timeline(t) for t in drawn),
        ))
    if frames.notes:
        out.append(page.section("trace-notes", "Notes on the traces", "What the trace reader had to skip: a torn last line is a recorder stopped mid-write.",
                                "".join(f"<p>{html.escape(n)}</p>" for n in frames.notes)))
    return out


OUTCOME_ORDER = ("ok", "input-required", "tool-error", "error", "http-error", "unanswered", "cancelled")


def _protocol(sessions: pd.DataFrame) -> list:
    """`2025-11-25 (handshake)`: the version and the era in one column."""
    return [None if not isinstance(version, str) else f"{version} ({era})" if isinstance(era, str) else version
            for version, era in zip(sessions["version"], sessions["era"], strict=True)]


def _with_version(sessions: pd.DataFrame, who: str) -> list:
    return [None if not isinstance(name, str) else f"{name} {version}" if isinstance(version, str) else name
            for name, version in zip(sessions[who], sessions[f"{who}_version"], strict=True)]


def _load_sections(loads: list[LoadRun]) -> list[str]:
    from mcpbench.analysis.charts import plot_latency_cdf, plot_latency_over_time

    samples = pd.concat([run.samples.assign(run=run.folder.name) for run in loads], ignore_index=True)
    classes = samples.dropna(subset=["failure"])
    failures = classes.groupby(["type", "failure"], observed=True).size().rename("failed calls").to_frame() if len(classes) else None
    out = [
        page.section(
            "load-latency", "Load runs: latency per step",
            "Locust's calls per request type (transport) and step: how many, and their latency (ms) from p50 to the slowest. "
            "A step far slower on one transport than on the others, or a p99 many times its p50, is worth a look.",
            "<p class=note>from " + ", ".join(html.escape(str(run.folder)) for run in loads) + "</p>",
            page.table(latency_table(samples, by=["type", "step"]).sort_index(), labels={**page.LATENCY_LABELS, "type": "request type"}),
        ),
        page.section("load-failures", "Load runs: failed calls by class",
                     "Calls the load client counted as failed, by request type and failure class. A run that meets its thresholds has none or a few.",
                     page.table(failures, labels={"type": "request type"}, empty="none: every call was answered without an error")),
    ]
    if len(samples):
        out.append(page.section(
            "load-charts", "Load runs: latency per request type",
            "Each call's latency over the run, and the share of calls answered within each latency, per request type. "
            "A latency that climbs while the load is steady, or a long tail on the right of a curve, is what would be wrong.",
            page.chart(lambda ax: plot_latency_over_time(samples, ax, time="t", by=("type",))),
            page.chart(lambda ax: plot_latency_cdf(samples, ax, by=("type",))),
        ))
    return out


def _replay_sections(replays: list[ReplayReport]) -> list[str]:
    """One table of every replay's counts; a chart and the changed paths for each replay where something changed."""
    from mcpbench.analysis.charts import plot_replay_changes

    table = pd.DataFrame(
        [{"report": r.path.name, "trace": Path(r.trace).name, "target": r.target, "exit": r.exit_code, **r.counts} for r in replays]
    )
    changed = [r for r in replays if (r.calls["status"] != "identical").any()] or replays[:1]
    parts = [page.table(table)]
    for report in changed:
        parts.append(f"<h3>{html.escape(report.path.name)}: {html.escape(Path(report.trace).name)} → {html.escape(report.target)}</h3>")
        if len(report.calls):
            parts.append(page.chart(lambda ax, r=report: plot_replay_changes(r.calls, ax, f"replay of {Path(r.trace).name} ({r.path.name}): calls per step by status")))
        if len(report.changes):
            parts.append("<h4>what changed</h4>" + page.table(report.changes))
    return [page.section(
        "replays", "Replays",
        "Each recorded call sent again to a target and its answer compared with the recording: identical, changed, missing, "
        "extra or failed. Against the same server every call should be identical; a change is either what you meant to test or a regression.",
        *parts,
    )]


def _lab_sections(labs: list[LabRun]) -> list[str]:
    from mcpbench.analysis.charts import plot_sticky, reconnect_timeline, recovery_times
    from mcpbench.analysis.results import load_reconnect

    out = []
    for index, lab in enumerate(labs):
        if not lab.sticky.empty:
            parts = [page.chart(lambda ax, s=lab.sticky: plot_sticky(s, ax), width=10), page.table(lab.sticky)]
            failures = lab.sticky_failures.loc[lab.sticky_failures["failed_calls"] + lab.sticky_failures["failed_sessions"] > 0]
            parts.append("<h3>failure classes</h3>" + page.table(failures, empty="none: no cell lost a session"))
            out.append(page.section(
                f"lab-sticky-{index}", f"Lab: sticky sessions ({lab.folder.name})",
                "Sessions through a load balancer in front of several instances, per protocol mode and routing policy: how many "
                "sessions failed. A mode that keeps state per session fails under round-robin (that is what the experiment shows); "
                "a failed session under a sticky policy or in a stateless mode is wrong.",
                *parts,
            ))
        if lab.reconnect is not None:
            run = load_reconnect(lab.folder)
            parts = [page.chart(lambda ax, p=policy: reconnect_timeline(run, p, ax), width=10, height=2.6)
                     for policy in dict.fromkeys(run.calls["policy"].astype(str))]
            parts.append(page.chart(lambda ax: recovery_times(run, ax)))
            parts.append("<h3>per cell: lost, duplicated and uncertain answers, extra requests</h3>" + page.table(lab.reconnect))
            out.append(page.section(
                f"lab-reconnect-{index}", f"Lab: reconnects under faults ({lab.folder.name})",
                "Streams cut on purpose under each reconnect policy: calls over time with the faults, the time to recover, and the "
                "answers lost or duplicated. A policy that resumes should lose none; losses under 'none' show what a policy prevents.",
                *parts,
            ))
    return out


STYLE = page.STYLE


def _drawn_sessions(drawn: list, sessions: int) -> set[int]:
    """Positions (in the sessions frame) of the sessions that have a timeline among `drawn`."""
    anchors = {t.anchor for t in drawn}
    return {i for i in range(sessions) if session_anchor(i) in anchors}


def render(inputs: Inputs) -> str:
    """The whole page: what to look at first, the headline figures, then each kind of input's sections."""
    from mcpbench.analysis.timeline import STYLE as TIMELINE_STYLE, timelines

    drawn = timelines(inputs.traces) if inputs.traces is not None else []
    found = findings(inputs, _drawn_sessions(drawn, len(inputs.traces.sessions)) if inputs.traces is not None else set())
    sections: list[str] = []
    if inputs.traces is not None:
        sections += _trace_sections(inputs.traces, drawn)
    if inputs.loads:
        sections += _load_sections(inputs.loads)
    if inputs.replays:
        sections += _replay_sections(inputs.replays)
    if inputs.labs:
        sections += _lab_sections(inputs.labs)
    for index, probe in enumerate(inputs.probes):
        sections.append(_probe_section(probe, index))
    for index, comparison in enumerate(inputs.compares):
        sections.append(_compare_section(comparison, index))
    for index, (folder, result) in enumerate(_capacities(inputs.loads)):
        sections.append(_capacity_section(folder, result, index))
    toc = "".join(f"<a href='#{anchor}'>{html.escape(title)}</a>" for anchor, title in SECTION_TITLE.findall("".join(sections)))
    body = [
        "<h1>mcpbench report</h1>",
        f"<p class=note>made {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} from {html.escape(', '.join(inputs.sources))}</p>",
        _attention(found),
        page.section("summary", "Summary", "The figures that matter, one line per kind of input; the sections below break them down.",
                     "<ul class=headline>" + "".join(f"<li>{html.escape(line)}</li>" for line in headlines(inputs)) + "</ul>",
                     f"<nav class=toc>{toc}</nav>"),
        *sections,
    ]
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>mcpbench report</title><style>{STYLE}{TIMELINE_STYLE}</style></head><body>{''.join(body)}</body></html>"
    )


CAPACITY_JSON = "capacity.json"  # what `mcpbench capacity` writes beside its load run's files
SECTION_TITLE = re.compile(r"<section id=([\w-]+)><h2>(.*?)</h2>")


def probe_page(probe: dict) -> str:
    """The page of one probe (`mcpbench probe --html`): what `mcpbench report` shows of its JSON."""
    return render(Inputs(probes=[probe], sources=[str(probe.get("probe", ""))]))


VERDICT_CLASS = {"pass": "pass", "warn": "warn", "fail": "fail", "n/a": "na"}


def _probe_section(probe: dict, index: int) -> str:
    from mcpbench.analysis.probe import charts, table

    drawn = [page.chart(draw, height=3.2) for draw in charts(probe)]
    checks = table(probe)
    checks["verdict"] = [page.Html(f"<span class='verdict {VERDICT_CLASS.get(v, '')}'>{html.escape(str(v))}</span>") for v in checks["verdict"]]
    return page.section(
        f"probe-{index}", f"Probe: {probe['probe']}",
        "Each check run against the deployment, its verdict, the evidence and the fix it suggests. "
        "A fail is something clients will hit; a warn may be.",
        page.table(checks), *drawn,
    )


def _compare_section(data: dict, index: int) -> str:
    """A comparison: its table, then per judged step the two distributions and the changes with their intervals."""
    from mcpbench.compare.chart import MAX_STEPS, plot_changes, plot_distributions
    from mcpbench.compare.judge import TOO_FEW, table_rows

    notes = "".join(f"<p class=note>{html.escape(note)}</p>" for note in data.get("notes", []))
    parts = [f"<p>{html.escape(compare_headline(data))} (confidence {data['confidence']:.0%})</p>", notes,
             page.table(pd.DataFrame(table_rows(data)))]
    for step in [s for s in data["steps"] if s["verdict"] != TOO_FEW][:MAX_STEPS]:
        parts.append(page.chart(lambda ax, s=step: plot_distributions(s, ax), height=3.0))
        parts.append(page.chart(lambda ax, s=step: plot_changes(s, ax, data["confidence"], data["min_change"]), height=2.2))
    return page.section(
        f"compare-{index}", "Comparison of load runs",
        "Each step's latency and errors in the base runs against the new ones, with intervals: a step judged "
        "slower, or more errors, beyond noise is a regression.",
        *parts,
    )


def _capacities(loads: list[LoadRun]) -> list[tuple[Path, dict]]:
    """The load runs that were capacity runs (`mcpbench capacity` wrote capacity.json beside them), with it."""
    out = []
    for run in loads:
        try:
            result = orjson.loads((run.folder / CAPACITY_JSON).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if isinstance(result, dict) and isinstance(result.get("steps"), list) and "slo" in result:
            out.append((run.folder, result))
    return out


def _capacity_section(folder: Path, result: dict, index: int) -> str:
    """A capacity run: what it found, the rate against latency and errors, and each step."""
    from mcpbench.capacity.chart import plot_capacity

    knee = result.get("knee")
    recovered = result.get("recovery") or {}
    facts = [capacity_line(result),
             f"knee at {knee['rate']:g}/s" if knee else "no knee (fewer than 3 steps, or latency never rose)",
             ("recovered " + (f"in {recovered['seconds']:g} s" if recovered.get("recovered") else "not within the low step"))
             if recovered else ""]
    steps = pd.DataFrame([{"rate /s": r["rate"], "phase": r["phase"], "calls": r["count"], "achieved /s": round(r["achieved_rate"], 1),
                           **{f"{q} ms": r.get(q) for q in ("p50", "p95", "p99")}, "errors": f"{r['error_ratio']:.1%}",
                           "held": {True: "yes", False: "no"}.get(r.get("held"), "-"), "why": "; ".join(r.get("why") or [])}
                          for r in result["steps"]])
    return page.section(
        f"capacity-{index}", f"Capacity: {folder.name}",
        "An open-model ramp: each step a fixed rate of call starts, latency from each call's intended start, until a step "
        "broke the SLO; then one low step to see the server recover.",
        "<p>" + html.escape("; ".join(f for f in facts if f)) + "</p>",
        page.chart(lambda ax: plot_capacity(result, ax), height=3.4), page.table(steps),
    )


def default_out(paths: list[str | os.PathLike]) -> Path:
    """`report.html` in the first path's folder (the path itself when it is one)."""
    first = Path(paths[0])
    return (first if first.is_dir() else first.parent) / REPORT_NAME


def write_report(paths: list[str | os.PathLike], out: str | os.PathLike | None = None) -> tuple[Path, list[str]]:
    """Collect, render and write the report whole; return its path and the headline lines.

    Raises:
        McpbenchError: a path is missing or unusable (names it).
    """
    inputs = collect(paths)
    target = Path(out) if out else default_out(paths)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, render(inputs).encode("utf-8"))
    return target, headlines(inputs)
