"""Per session, its calls as bars over time (a waterfall), in HTML and CSS: no script, no image.

One row per call, at its place in time since the session's first event; the rounds of a multi
round-trip request (an `input-required` answer, then the same step sent again) share a row;
progress notifications are diamonds on the call they arrived during; violations are marks on a
row of their own. Bars are placed in percent of the session's span, so the drawing fits any page
width, and a phone shows the same picture narrower. `timelines` picks the sessions to draw: those
that went wrong first, then the busiest, at most `MAX_SESSIONS`.
"""

import html
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from mcpbench.analysis.page import counted, number
from mcpbench.analysis.traces import TraceFrames
from mcpbench.protocol.versions import PROGRESS

# Sessions drawn: enough to see every kind of session of a run, few enough to keep the file small.
MAX_SESSIONS = 12
# Rows drawn per session: a long session shows its start and says how many rows were left out.
MAX_ROWS = 40
# Longest row label (characters): longer steps (a resource URI) are cut in the middle.
LABEL_CHARS = 34
# A session with unanswered calls is drawn this much longer, so their bars (to the right edge) show.
LOST_ROOM = 0.08
# Tick labels: at most this many along the time axis.
MAX_TICKS = 6

# outcome -> (css class, words in the legend)
OUTCOMES = {
    "ok": ("ok", "answered"),
    "input-required": ("round", "round asking for input (MRTR)"),
    "tool-error": ("toolerr", "tool error (isError)"),
    "error": ("err", "JSON-RPC error"),
    "http-error": ("err", "HTTP error (its time not in the trace)"),
    "unanswered": ("lost", "no answer in the trace"),
    "cancelled": ("cancel", "cancelled by its sender, no answer"),
}
PROBLEMS = ("error", "http-error", "unanswered")


@dataclass
class Bar:
    start: float  # seconds since the session's start
    end: float
    outcome: str
    title: str


@dataclass
class TimelineRow:
    label: str
    took: str  # the whole operation's time, for reading
    bars: list[Bar] = field(default_factory=list)
    progress: list[float] = field(default_factory=list)
    server: bool = False  # a request from the server (sampling, elicitation, roots)
    rounds: int = 1  # the rounds of a multi round-trip request drawn on this row


@dataclass
class Timeline:
    anchor: str
    heading: str
    span: float  # seconds drawn
    rows: list[TimelineRow]
    violations: list[tuple[float, str]]
    hidden_rows: int = 0  # the session's later calls, not drawn
    loose_progress: list[float] = field(default_factory=list)  # progress during no call or several
    failed: bool = False  # errors, calls without an answer or violations


def session_anchor(position: int) -> str:
    """The anchor of the `position`-th row of the sessions frame's timeline."""
    return f"timeline-{position}"


def pick(sessions: pd.DataFrame, limit: int = MAX_SESSIONS) -> list[int]:
    """Positions (in `sessions`) of the sessions to draw: those with errors, lost answers or violations
    first, then tool errors, then the ones with most calls; sessions without calls last."""
    if sessions.empty:
        return []
    bad = sessions["errors"] + sessions["unanswered"] + sessions["violations"]
    order = sorted(range(len(sessions)), key=lambda i: (-int(bad.iat[i] > 0), -int(bad.iat[i]), -int(sessions["tool_errors"].iat[i] > 0),
                                                        -int(sessions["calls"].iat[i])))
    return [i for i in order if sessions["calls"].iat[i] > 0 or bad.iat[i] > 0][:limit]


def timelines(frames: TraceFrames, limit: int = MAX_SESSIONS) -> list[Timeline]:
    """The timelines of the sessions `pick` chooses, in its order, and one per trace of its calls outside
    any session (drawn whatever the limit: after the sessions that went wrong when some of them failed, else last)."""
    sessions = frames.sessions
    calls = frames.calls
    events = frames.events
    progress = events[(events["kind"] == "message") & (events["name"] == PROGRESS)] if len(events) else events
    violations = frames.violations

    def draw(anchor: str, info: pd.Series, mine: pd.DataFrame, key_is: Any) -> Timeline:
        trace = info["trace"]
        ticks = progress[(progress["trace"] == trace) & key_is(progress["session"])]["ts"] if len(progress) else pd.Series(dtype="datetime64[ns, UTC]")
        marks = violations[(violations["trace"] == trace) & key_is(violations["session"])]
        if not isinstance(info["session"], str):  # calls outside any session: their violations, counted here
            info = info.copy()
            info["violations"] = len(marks)
        return _timeline(anchor, info, mine.sort_values("start", kind="stable"), ticks, marks)

    loose = [draw(outside_anchor(i), _outside_info(trace, part), part, lambda column: column.isna())
             for i, (trace, part) in enumerate(outside(frames))]
    failing = [t for t in loose if t.failed]
    picked = pick(sessions, max(limit - len(loose), 1))
    out = [draw(session_anchor(p), sessions.iloc[p], calls[(calls["trace"] == sessions["trace"].iat[p]) & (calls["session"] == sessions["session"].iat[p])],
                lambda column, key=sessions["session"].iat[p]: column == key) for p in picked]
    went_wrong = sum(1 for t in out if t.failed)
    return out[:went_wrong] + failing + out[went_wrong:] + [t for t in loose if not t.failed]


def outside(frames: TraceFrames) -> list[tuple[str, pd.DataFrame]]:
    """Per trace, its calls outside any session (requests the recorder could not put in one), traces in order."""
    loose = frames.calls[frames.calls["session"].isna()]
    return [(str(trace), part) for trace, part in loose.groupby("trace", observed=True, sort=True)]


def outside_anchor(index: int) -> str:
    """The anchor of the timeline of the `index`-th trace's calls outside any session (in `outside`'s order)."""
    return f"timeline-outside-{index}"


def _outside_info(trace: str, part: pd.DataFrame) -> pd.Series:
    """What a sessions row says, for calls outside any session."""
    outcomes = part["outcome"].astype(str)
    return pd.Series({
        "trace": trace, "session": None, "transport": part["transport"].iloc[0], "era": None, "client": None, "server": None,
        "start": part["start"].min(), "end": (part["start"] + pd.to_timedelta(part["latency_ms"].fillna(0.0), unit="ms")).max(),
        "calls": len(part), "errors": int(outcomes.isin(["error", "http-error"]).sum()), "unanswered": int((outcomes == "unanswered").sum()),
        "tool_errors": int((outcomes == "tool-error").sum()), "violations": 0,
    })


def _seconds(stamp: pd.Timestamp, zero: pd.Timestamp) -> float:
    return (stamp - zero).total_seconds()


def _timeline(anchor: str, info: pd.Series, calls: pd.DataFrame, ticks: pd.Series, violations: pd.DataFrame) -> Timeline:
    """The rows of one session's first `MAX_ROWS` operations, over the time they cover (the whole session when all fit)."""
    zero = info["start"]
    rows: list[TimelineRow] = []
    open_rounds: dict[str, TimelineRow] = {}  # step -> the row whose last round asked for input
    drawn = 0
    for call in calls.itertuples(index=False):
        step = str(call.step)
        row = open_rounds.pop(step, None) if call.dir == "c2s" else None
        if row is None:
            if len(rows) == MAX_ROWS:
                break
            row = TimelineRow(label=step, took="", server=call.dir == "s2c")
            rows.append(row)
        drawn += 1
        start = _seconds(call.start, zero)
        answered = not math.isnan(call.latency_ms)
        outcome = str(call.outcome)
        end = start + call.latency_ms / 1000.0 if answered else math.nan  # drawn to the right edge, once known
        took = f"{number(call.latency_ms)} ms" if answered else "no answer"
        if outcome == "http-error":  # refused by HTTP: when is not in the calls, so a mark at its start, not a bar
            end = start
            took = f"HTTP {call.http_status}" if not pd.isna(call.http_status) else "HTTP error"
        row.rounds = len(row.bars) + 1
        detail = f": {call.detail}" if isinstance(call.detail, str) and call.detail else ""
        round_ = f" (round {row.rounds})" if row.rounds > 1 or outcome == "input-required" else ""
        row.bars.append(Bar(start, end, outcome, f"{step}{round_}: {outcome}, {took}, at +{start * 1000:.1f} ms{detail}"))
        row.took = _duration((end - row.bars[0].start) * 1000.0) if answered else took
        if outcome == "input-required":
            open_rounds[step] = row
    hidden = len(calls) - drawn
    bars = [b for r in rows for b in r.bars]
    last = max([b.end for b in bars if not math.isnan(b.end)] + [b.start for b in bars] + [0.0])
    span = max(last if hidden else max(last, _seconds(info["end"], zero)), 1e-3)
    if any(math.isnan(b.end) for b in bars):  # room on the right for the bars of the answers that never came
        span *= 1.0 + LOST_ROOM
        for bar in bars:
            bar.end = span if math.isnan(bar.end) else bar.end
    loose = []
    for stamp in ticks:
        at = _seconds(stamp, zero)
        if at <= span:
            during = [r for r in rows if not r.server and any(b.start <= at <= b.end for b in r.bars)]
            (during[-1].progress if len(during) == 1 else loose).append(at)
    marks = [(t, f"{code}: {detail}") for ts, code, detail in zip(violations["ts"], violations["code"], violations["detail"], strict=True)
             if (t := _seconds(ts, zero)) <= span]
    failed = bool(info["errors"] or info["unanswered"] or info["violations"])
    return Timeline(anchor, _heading(info), span, rows, marks, hidden, loose, failed)


def _heading(info: pd.Series) -> str:
    who = " → ".join(str(v) for v in (info["client"], info["server"]) if isinstance(v, str))
    era = f", {info['era']}" if isinstance(info["era"], str) else ""
    counts = [counted(int(info[c]), w) for c, w in (("calls", "call"), ("errors", "error"), ("unanswered", "unanswered call"),
                                                     ("tool_errors", "tool error"), ("violations", "violation")) if info[c] or c == "calls"]
    whose = f"session {info['session']}" if isinstance(info["session"], str) else "calls outside any session"
    return f"{info['trace']} · {whose} · {info['transport']}{era}" + (f" · {who}" if who else "") + " · " + ", ".join(counts)


def _duration(ms: float) -> str:
    return f"{number(ms / 1000.0)} s" if ms >= 1000 else f"{number(ms)} ms"


def _short(text: str) -> str:
    if len(text) <= LABEL_CHARS:
        return text
    half = (LABEL_CHARS - 1) // 2
    return f"{text[:half]}…{text[-half:]}"


def _ticks(span: float) -> list[float]:
    """Round times along [0, span]: 1, 2 or 5 times a power of ten apart, at most MAX_TICKS."""
    exponent = math.floor(math.log10(span / MAX_TICKS)) if span > 0 else -3
    for factor in (1, 2, 5, 10):
        step = factor * 10.0**exponent
        if span / step <= MAX_TICKS:
            break
    return [i * step for i in range(int(span / step) + 1)]


def _pct(t: float, span: float) -> str:
    return f"{min(max(100.0 * t / span, 0.0), 100.0):.2f}%"


def _tick_label(t: float, span: float) -> str:
    return f"{round(t, 6):g} s" if span >= 2.0 else f"{round(t * 1000.0, 6):g} ms"


def render(timeline: Timeline) -> str:
    """One timeline as a <figure>: heading, legend, the rows, the time axis."""
    span = timeline.span
    used = {b.outcome for r in timeline.rows for b in r.bars}
    legend = [f"<span><i class='sw {OUTCOMES[o][0]}'></i>{html.escape(OUTCOMES[o][1])}</span>" for o in OUTCOMES if o in used]
    if any(r.progress for r in timeline.rows) or timeline.loose_progress:
        legend.append("<span><i class='sw prog'></i>progress notification</span>")
    if timeline.violations:
        legend.append("<span><i class='sw viol'></i>violation</span>")
    if any(r.server for r in timeline.rows):
        legend.append("<span>← a request from the server</span>")
    grid = "".join(f"<i class=grid style='left:{_pct(t, span)}'></i>" for t in _ticks(span)[1:])
    lines = []
    if timeline.violations or timeline.loose_progress:
        marks = [f"<i class='mark viol' style='left:{_pct(t, span)}' title='{html.escape(text, quote=True)}'></i>" for t, text in timeline.violations]
        marks += [f"<i class='mark prog' style='left:{_pct(t, span)}' title='progress at +{t * 1000:.1f} ms'></i>" for t in timeline.loose_progress]
        lines.append(_row("events", "", "".join(marks), grid, "other"))
    for row in timeline.rows:
        bars = []
        for index, bar in enumerate(row.bars):
            width = max(100.0 * (bar.end - bar.start) / span, 0.0)
            joined = " next" if index else ""
            bars.append(f"<i class='bar {OUTCOMES.get(bar.outcome, ('ok',))[0]}{joined}' style='left:{_pct(bar.start, span)};width:{width:.2f}%' "
                        f"title='{html.escape(bar.title, quote=True)}'></i>")
        bars += [f"<i class='mark prog' style='left:{_pct(t, span)}' title='progress at +{t * 1000:.1f} ms'></i>" for t in row.progress]
        label = ("← " if row.server else "") + row.label + (f" ({row.rounds} rounds)" if row.rounds > 1 else "")
        lines.append(_row(label, row.took, "".join(bars), grid, "server" if row.server else ""))
    axis = "".join(f"<span class='tick{' odd' if i % 2 else ''}' style='left:{_pct(t, span)}'>{_tick_label(t, span)}</span>"
                   for i, t in enumerate(_ticks(span)))
    hidden = (f"<p class=note>the first {len(timeline.rows)} rows; {counted(timeline.hidden_rows, 'later call')} not drawn</p>"
              if timeline.hidden_rows else "")
    return (
        f"<figure class=timeline id={timeline.anchor} data-rows={len(timeline.rows)}>"
        f"<figcaption>{html.escape(timeline.heading)}</figcaption>"
        f"<div class=legend>{''.join(legend)}</div>"
        f"<div class=tl>{''.join(lines)}<div class='tlrow axis'><span class=lab>time since the session's start</span><span class=track>{axis}</span><span class=took></span></div></div>"
        f"{hidden}</figure>"
    )


def _row(label: str, took: str, marks: str, grid: str, kind: str) -> str:
    words = html.escape(_short(label)).replace("/", "/<wbr>")
    return (f"<div class='tlrow {kind}'><span class=lab title='{html.escape(label, quote=True)}'>{words}</span>"
            f"<span class=track>{grid}{marks}</span><span class=took>{html.escape(took)}</span></div>")


STYLE = """
figure.timeline{margin:1.2em 0 1.8em;border:1px solid #d0d7de;border-radius:6px;padding:.6em .8em}
figure.timeline figcaption{font-weight:600;font-size:.92em;overflow-wrap:anywhere}
.legend{display:flex;flex-wrap:wrap;gap:.2em 1.1em;font-size:.8em;color:#3d444d;margin:.35em 0 .5em}
.legend span{white-space:nowrap}.sw{display:inline-block;width:1.1em;height:.75em;margin-right:.35em;vertical-align:-.05em;border-radius:2px}
.tl{--lw:15em;--rw:6.5em;font-size:12px}
.tlrow{display:grid;grid-template-columns:var(--lw) minmax(0,1fr) var(--rw);align-items:center;min-height:18px;border-top:1px solid #f0f2f4}
.tlrow .lab{padding-right:.6em;overflow-wrap:normal;line-height:1.2}
.tlrow.server .lab{color:#6e40c9}.tlrow.other .lab{color:#656d76;font-style:italic}
.tlrow .took{text-align:right;color:#3d444d;font-variant-numeric:tabular-nums;padding-left:.4em;line-height:1.2}
.track{position:relative;height:18px;margin-right:7px}
.grid{position:absolute;top:0;bottom:0;border-left:1px dotted #d0d7de}
.bar{position:absolute;top:4px;height:10px;min-width:3px;border-radius:2px}
.bar.next{box-shadow:-3px 0 0 #fff}
.ok,.sw.ok{background:#2da44e}.round,.sw.round{background:#8250df}.toolerr,.sw.toolerr{background:#d4a72c}
.err,.sw.err{background:#cf222e}.cancel,.sw.cancel{background:#8c959f}.lost,.sw.lost{background:repeating-linear-gradient(135deg,#8c959f 0 4px,#d0d7de 4px 8px)}
.mark{position:absolute;width:8px;height:8px;top:5px;margin-left:-4px;transform:rotate(45deg)}
.mark.prog,.sw.prog{background:#0969da;border:1px solid #fff}.mark.viol,.sw.viol{background:#cf222e}
.sw.prog,.sw.viol{width:.7em;height:.7em;transform:rotate(45deg);margin-left:.2em}
.tlrow.axis{border-top:1px solid #8c959f;min-height:2.4em;align-items:start}.tlrow.axis .lab{color:#656d76;font-size:.9em;padding-top:.3em}
.tick{position:absolute;top:.3em;transform:translateX(-50%);white-space:nowrap;color:#3d444d;font-variant-numeric:tabular-nums}
.tick:first-child{transform:none}
@media (max-width:600px){.tl{--lw:8.5em;--rw:4.6em;font-size:11px}.tick.odd{display:none}}
"""
