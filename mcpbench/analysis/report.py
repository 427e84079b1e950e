"""`mcpbench report PATH…`: one self-contained `report.html` from traces, load runs, replay reports and lab runs.

Three steps, each testable alone: `collect` finds what the paths hold and loads
it with the public loaders; `headlines` and the section builders turn frames
into tables and charts (the plot functions of `charts.py`); `render` writes one
HTML page with every chart embedded as a PNG data URI, no script and no network
fetch, so the page opens from disk anywhere.
"""

import base64
import html
import io
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pandas as pd

from mcpbench.analysis.probe import load_probe, probe_line
from mcpbench.analysis.results import LabRun, LoadRun, ReplayReport, load_lab, load_replay, load_run
from mcpbench.analysis.tables import latency_table, outcome_table
from mcpbench.compare.chart import headline as compare_headline
from mcpbench.compare.judge import read_json as read_compare
from mcpbench.analysis.traces import TraceFrames, load_trace
from mcpbench.outputs import write_atomic
from mcpbench.protocol.errors import McpbenchError

REPORT_NAME = "report.html"
TRACE_SUFFIXES = (".jsonl", ".jsonl.gz")
# A run folder holds its parts a level or two down (load/, lab/); deeper is not ours.
SCAN_DEPTH = 2
# Tables longer than this show their first rows and say how many were left out.
MAX_ROWS = 40
# Charts are 9 x 4 inches: 100 dpi gives 900 px, the page's width, sharp without bloating the file.
CHART_DPI = 100


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
        if path.name.endswith(TRACE_SUFFIXES) and not path.name.startswith("samples"):
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


def _chart(draw, width: float = 9.0, height: float = 4.0) -> str:
    """Run `draw(ax)` on a new figure; return it as an <img> with a PNG data URI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height))
    try:
        ax = draw(ax)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=CHART_DPI)
    finally:
        plt.close(fig)
    title = html.escape(ax.get_title())
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<figure><img alt="{title}" src="data:image/png;base64,{data}"></figure>'


def _table(frame: pd.DataFrame, index: bool = True) -> str:
    if frame is None or frame.empty:
        return "<p class=none>none</p>"
    shown = frame.head(MAX_ROWS)
    shown = shown.map(lambda v: v.isoformat(sep=" ", timespec="milliseconds") if isinstance(v, pd.Timestamp) else v)
    out = shown.to_html(index=index, float_format=lambda v: f"{v:.2f}", na_rep="", border=0, classes="data")
    if len(frame) > MAX_ROWS:
        out += f"<p class=note>first {MAX_ROWS} of {len(frame)} rows</p>"
    return out


def _section(title: str, *parts: str) -> str:
    return f"<section><h2>{html.escape(title)}</h2>{''.join(parts)}</section>"


def _trace_sections(frames: TraceFrames) -> list[str]:
    from mcpbench.analysis.charts import plot_latency_cdf, plot_latency_over_time

    calls = frames.calls
    out = [
        _section(
            "Traces: latency per method and per tool (ms)",
            "<h3>per method</h3>", _table(latency_table(calls, by="method")),
            "<h3>per tool</h3>", _table(latency_table(calls.dropna(subset=["tool"]), by="tool")),
        )
    ]
    charts = []
    if calls["latency_ms"].notna().any():
        charts.append(_chart(lambda ax: plot_latency_over_time(calls, ax)))
        charts.append(_chart(lambda ax: plot_latency_cdf(calls, ax)))
    out.append(_section("Traces: latency per transport and era", *charts) if charts else "")
    out.append(_section("Traces: outcomes per method", _table(outcome_table(calls, by="method"))))
    violations = frames.violations
    by_code = violations.groupby("code", observed=True).size().rename("count").to_frame() if len(violations) else pd.DataFrame()
    out.append(_section("Violations", _table(by_code), _table(violations, index=False) if len(violations) else ""))
    sessions = frames.sessions.assign(
        handshake_ms=frames.sessions["handshake_ms"].round(1),
        start=frames.sessions["start"].dt.strftime("%Y-%m-%d %H:%M:%S.%f").str[:-3],
        end=frames.sessions["end"].dt.strftime("%H:%M:%S.%f").str[:-3],
    )
    out.append(_section("Sessions", _table(sessions, index=False)))
    if frames.notes:
        out.append(_section("Notes", "".join(f"<p>{html.escape(n)}</p>" for n in frames.notes)))
    return out


def _load_sections(loads: list[LoadRun]) -> list[str]:
    from mcpbench.analysis.charts import plot_latency_cdf, plot_latency_over_time

    samples = pd.concat([run.samples.assign(run=run.folder.name) for run in loads], ignore_index=True)
    classes = samples.dropna(subset=["failure"])
    out = [
        _section(
            "Load runs: latency per step (ms)",
            "<p>" + ", ".join(html.escape(str(run.folder)) for run in loads) + "</p>",
            _table(latency_table(samples, by=["type", "step"]).sort_index()),
        ),
        _section("Load runs: failure classes", _table(classes.groupby(["type", "failure"], observed=True).size().rename("failed").to_frame() if len(classes) else pd.DataFrame())),
    ]
    if len(samples):
        out.append(
            _section(
                "Load runs: latency per request type",
                _chart(lambda ax: plot_latency_over_time(samples, ax, time="t", by=("type",))),
                _chart(lambda ax: plot_latency_cdf(samples, ax, by=("type",))),
            )
        )
    return out


def _replay_sections(replays: list[ReplayReport]) -> list[str]:
    """One table of every replay's counts; a chart and the changed paths for each replay where something changed."""
    from mcpbench.analysis.charts import plot_replay_changes

    table = pd.DataFrame(
        [{"report": r.path.name, "trace": Path(r.trace).name, "target": r.target, "exit": r.exit_code, **r.counts} for r in replays]
    )
    changed = [r for r in replays if (r.calls["status"] != "identical").any()] or replays[:1]
    parts = [_table(table, index=False)]
    for report in changed:
        parts.append(f"<h3>{html.escape(report.path.name)}: {html.escape(Path(report.trace).name)} → {html.escape(report.target)}</h3>")
        if len(report.calls):
            parts.append(_chart(lambda ax, r=report: plot_replay_changes(r.calls, ax, f"replay of {Path(r.trace).name} ({r.path.name}): calls per step by status")))
        if len(report.changes):
            parts.append("<h4>changed calls</h4>" + _table(report.changes, index=False))
    return [_section("Replays", *parts)]


def _lab_sections(labs: list[LabRun]) -> list[str]:
    from mcpbench.analysis.charts import plot_sticky, reconnect_timeline, recovery_times
    from mcpbench.analysis.results import load_reconnect

    out = []
    for lab in labs:
        if not lab.sticky.empty:
            parts = [_chart(lambda ax, s=lab.sticky: plot_sticky(s, ax), width=10), _table(lab.sticky, index=False)]
            failures = lab.sticky_failures.loc[lab.sticky_failures["failed_calls"] + lab.sticky_failures["failed_sessions"] > 0]
            parts.append("<h3>failure classes</h3>" + _table(failures, index=False))
            out.append(_section(f"Lab: sticky sessions ({lab.folder.name})", *parts))
        if lab.reconnect is not None:
            run = load_reconnect(lab.folder)
            parts = [_chart(lambda ax, p=policy: reconnect_timeline(run, p, ax), width=10, height=2.6)
                     for policy in dict.fromkeys(run.calls["policy"].astype(str))]
            parts.append(_chart(lambda ax: recovery_times(run, ax)))
            counts = lab.reconnect.convert_dtypes().astype(object).fillna("")  # whole counts stay whole; SDK rows leave cells empty
            parts.append("<h3>per cell: lost, duplicated and uncertain answers, extra requests</h3>" + _table(counts, index=False))
            out.append(_section(f"Lab: reconnects under faults ({lab.folder.name})", *parts))
    return out


STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
ul.headline li{font-size:1.05em;margin:.2em 0}
table.data{border-collapse:collapse;font-size:12px;margin:.5em 0;display:block;overflow-x:auto}
table.data th,table.data td{border:1px solid #ddd;padding:2px 6px;text-align:right;overflow-wrap:anywhere}
table.data td:first-child,table.data th:first-child{text-align:left}
figure{margin:1em 0}img{max-width:100%;height:auto}p.note,p.none{color:#777}
"""


def render(inputs: Inputs) -> str:
    """The whole page: summary first, then each kind of input's sections."""
    body = [
        "<h1>mcpbench report</h1>",
        f"<p class=note>made {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} from {html.escape(', '.join(inputs.sources))}</p>",
        _section("Summary", "<ul class=headline>" + "".join(f"<li>{html.escape(line)}</li>" for line in headlines(inputs)) + "</ul>"),
    ]
    if inputs.traces is not None:
        body += _trace_sections(inputs.traces)
    if inputs.loads:
        body += _load_sections(inputs.loads)
    if inputs.replays:
        body += _replay_sections(inputs.replays)
    if inputs.labs:
        body += _lab_sections(inputs.labs)
    for probe in inputs.probes:
        body.append(_probe_section(probe))
    for comparison in inputs.compares:
        body.append(_compare_section(comparison))
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>mcpbench report</title><style>{STYLE}</style></head><body>{''.join(body)}</body></html>"
    )


def probe_page(probe: dict) -> str:
    """The page of one probe (`mcpbench probe --html`): what `mcpbench report` shows of its JSON."""
    return render(Inputs(probes=[probe], sources=[str(probe.get("probe", ""))]))


def _probe_section(probe: dict) -> str:
    from mcpbench.analysis.probe import charts, table

    drawn = [_chart(draw, height=3.2) for draw in charts(probe)]
    return _section(f"Probe: {probe['probe']}", _table(table(probe), index=False), *drawn)


def _compare_section(data: dict) -> str:
    """A comparison: its table, then per judged step the two distributions and the changes with their intervals."""
    from mcpbench.compare.chart import MAX_STEPS, plot_changes, plot_distributions
    from mcpbench.compare.judge import TOO_FEW, table_rows

    notes = "".join(f"<p class=note>{html.escape(note)}</p>" for note in data.get("notes", []))
    parts = [f"<p>{html.escape(compare_headline(data))} (confidence {data['confidence']:.0%})</p>", notes,
             _table(pd.DataFrame(table_rows(data)), index=False)]
    for step in [s for s in data["steps"] if s["verdict"] != TOO_FEW][:MAX_STEPS]:
        parts.append(_chart(lambda ax, s=step: plot_distributions(s, ax), height=3.0))
        parts.append(_chart(lambda ax, s=step: plot_changes(s, ax, data["confidence"], data["min_change"]), height=2.2))
    return _section("Comparison of load runs", *parts)


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
