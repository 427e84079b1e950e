"""The report page's building blocks: tables a person reads, sections that say what they show, charts.

A frame becomes a table here, not through `DataFrame.to_html`: column names become words with
units (`handshake_ms` → `handshake (ms)`), the index becomes ordinary columns (no empty row under
the header), numbers are rounded for reading and right-aligned, times show the time of day to the
millisecond, and every table scrolls inside its own box, so a phone-width page never overflows.
Headers wrap between words only. Charts are PNG data URIs that say, as attributes, how many
series they drew and whether they have a legend (the browser test reads them).
"""

import base64
import html
import io
import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

# Tables longer than this show their first rows and say how many were left out.
MAX_ROWS = 40
# Charts are 9 x 4 inches: 100 dpi gives 900 px, the page's width, sharp without bloating the file.
CHART_DPI = 100
# Text longer than this in a cell wraps between words (a detail, an evidence line), not the table.
LONG_TEXT = 40

UNITS = {"_ms": "ms", "_bytes": "bytes", "_s": "s", "_pct": "%"}
# Names a rule cannot turn into words.
LABELS = {
    "p50": "p50 (ms)", "p90": "p90 (ms)", "p99": "p99 (ms)", "max": "max (ms)",
    "ttfe_ms": "first event (ms)", "dir": "direction", "era": "era", "exit": "exit status",
    "first_instance_share": "first instance's share (%)", "seconds": "time (s)", "ts": "time (UTC)",
    "start": "start (UTC)", "end": "end (UTC)", "recover_p50_ms": "recovery p50 (ms)",
    "recover_p95_ms": "recovery p95 (ms)", "recover_max_ms": "recovery max (ms)",
    "http_status": "HTTP status", "error_code": "error code", "t": "time (UTC)",
}
# The header words of `tables.latency_table`'s columns.
LATENCY_LABELS = {"count": "calls"}
# Columns holding a share in 0..1, shown as a percentage.
SHARES = ("first_instance_share",)


class Html(str):
    """Text that is already HTML (a link): a table cell shows it as it is."""


def label(column: Any) -> str:
    """A column's name in words with its unit: `handshake_ms` → `handshake (ms)`.

    Example: `failed_calls:session-not-found` → `failed calls: session-not-found`.
    """
    name = str(column)
    if name in LABELS:
        return LABELS[name]
    head, colon, tail = name.partition(":")
    unit = next((u for suffix, u in UNITS.items() if head.endswith(suffix)), None)
    if unit:
        head = head[: head.rindex("_")]
    words = head.replace("_", " ").strip()
    text = f"{words}: {tail}" if colon else words
    return f"{text} ({unit})" if unit else text


def number(value: float) -> str:
    """A number rounded for reading: whole numbers whole, else three figures or so (0.35, 4.27, 12.3, 148)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral) or (math.isfinite(value) and float(value).is_integer() and abs(value) < 1e15):
        text = f"{int(value):,}"
        return text.replace(",", "\u202f") if abs(int(value)) >= 10_000 else text.replace(",", "")
    size = abs(value)
    if not math.isfinite(value):
        return str(value)
    digits = 0 if size >= 100 else 1 if size >= 10 else 2 if size >= 0.01 else 3
    return f"{value:.{digits}f}"


def counted(n: int, word: str) -> str:
    """`1 call`, `2 calls`: a count and its noun (a plain `s` plural)."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _missing(value: Any) -> bool:
    try:
        return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))
    except (TypeError, ValueError):
        return False


def cell(column: str, value: Any) -> str:
    """One value as the text of its cell (HTML-escaped)."""
    if _missing(value):
        return "–"
    if isinstance(value, Html):
        return str(value)
    if isinstance(value, pd.Timestamp):
        return value.strftime("%H:%M:%S.%f")[:-3]
    if isinstance(value, numbers.Number):
        if column in SHARES:
            return f"{100.0 * float(value):.0f}"
        return number(value)
    return html.escape(str(value))


def _numeric(series: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(series.dtype):
        return False
    if pd.api.types.is_numeric_dtype(series.dtype):
        return True
    present = [v for v in series if not _missing(v)]
    return bool(present) and all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in present)


def _long(series: pd.Series) -> bool:
    return any(isinstance(v, str) and not isinstance(v, Html) and len(v) > LONG_TEXT for v in series)


def table(frame: pd.DataFrame | None, *, labels: Mapping[str, str] | None = None, row_ids: list[str] | None = None,
          empty: str = "none", max_rows: int = MAX_ROWS) -> str:
    """A frame as a table in its own scrolling box; its index becomes columns unless it is a plain range.

    Args:
        labels: header words for some columns, over `label()`'s.
        row_ids: an anchor per row (links elsewhere on the page point at it).
        empty: what to say when there is nothing to show.
    """
    if frame is None or frame.empty:
        return f"<p class=none>{html.escape(empty)}</p>"
    if not isinstance(frame.index, pd.RangeIndex) or frame.index.name is not None:
        frame = frame.reset_index()
    shown = frame.head(max_rows)
    labels = labels or {}
    columns = [str(c) for c in shown.columns]
    kinds = ["num" if _numeric(shown[c]) else "text" if _long(shown[c]) else "" for c in shown.columns]
    head = "".join(f"<th{_class(kind)} scope=col>{_words(labels.get(c, label(c)))}</th>" for c, kind in zip(columns, kinds, strict=True))
    rows = []
    for position, values in enumerate(shown.itertuples(index=False, name=None)):
        anchor = f" id={row_ids[position]}" if row_ids and position < len(row_ids) and row_ids[position] else ""
        cells = "".join(f"<td{_class(kind)}>{cell(c, v)}</td>" for c, kind, v in zip(columns, kinds, values, strict=True))
        rows.append(f"<tr{anchor}>{cells}</tr>")
    out = f"<div class=scroll><table class=data><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    if len(frame) > max_rows:
        out += f"<p class=note>first {max_rows} of {len(frame)} rows</p>"
    return out


def _words(text: str) -> str:
    """A header's text that wraps between words only: its hyphens do not break (`tool-error`)."""
    return html.escape(text).replace("-", "\u2011")


def _class(kind: str) -> str:
    return f" class={kind}" if kind else ""


def section(anchor: str, title: str, lead: str, *parts: str) -> str:
    """A section: its heading (an anchor to link to), one sentence on what it shows and what would be wrong, its parts."""
    return (f"<section id={anchor}><h2>{html.escape(title)}</h2><p class=lead>{html.escape(lead)}</p>"
            f"{''.join(parts)}</section>")


def chart(draw: Callable[[Any], Any], width: float = 9.0, height: float = 4.0) -> str:
    """Run `draw(ax)` on a new figure; return it as a <figure> with a PNG data URI.

    The figure says how many series it drew (`data-series`) and whether it has a legend
    (`data-legend`), from the drawn axes, so a check of the page need not read pixels.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height))
    try:
        ax = draw(ax)
        series = len(ax.lines) + len(ax.collections) + len(ax.patches)
        legend = ax.get_legend() is not None
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=CHART_DPI)
    finally:
        plt.close(fig)
    title = html.escape(ax.get_title())
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return (f'<figure class=chart data-series={series} data-legend={"yes" if legend else "no"}>'
            f'<img alt="{title}" src="data:image/png;base64,{data}"></figure>')


STYLE = """
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1200px;color:#1f2328;padding:1em 1.25em 3em}
h1{font-size:1.7em;margin:.3em 0 .1em}h2{font-size:1.3em;border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin:2.2em 0 .4em}
h3{font-size:1.05em;margin:1.4em 0 .3em}h4{font-size:1em;margin:1em 0 .3em}h3,h4{overflow-wrap:anywhere}
a{color:#0969da}p.lead{color:#3d444d;margin:.2em 0 .8em;max-width:52em}
p.note,p.none{color:#656d76;font-size:.9em;overflow-wrap:anywhere}
ul.headline{padding-left:1.2em}ul.headline li{margin:.25em 0}
nav.toc{font-size:.9em;margin:.6em 0 0}nav.toc a{margin-right:1em;white-space:nowrap;display:inline-block}
.attention{border:1px solid #d0d7de;border-left:5px solid #cf222e;border-radius:6px;padding:.6em 1em;margin:1em 0;background:#fff8f8}
.attention.clear{border-left-color:#1a7f37;background:#f6fff8}
.attention h2{border:0;margin:.1em 0 .3em;font-size:1.2em}
.attention ul{margin:.2em 0;padding-left:1.2em}.attention li{margin:.3em 0;overflow-wrap:anywhere}
.sev{display:inline-block;font-size:.75em;font-weight:600;text-transform:uppercase;border-radius:3px;padding:0 .4em;margin-right:.4em;color:#fff;background:#cf222e}
.sev.warn{background:#9a6700}
.purpose{border:1px solid #d0d7de;border-left:5px solid #8c959f;border-radius:6px;padding:.6em 1em;margin:1em 0;background:#f6f8fa}
.purpose h2{border:0;margin:.1em 0 .3em;font-size:1.1em}
.purpose ul{margin:.2em 0;padding-left:1.2em}.purpose li{margin:.3em 0;overflow-wrap:anywhere}
.sev.shown{background:#57606a}
div.scroll{overflow-x:auto;width:fit-content;max-width:100%;margin:.5em 0;border:1px solid #d0d7de;border-radius:6px}
table.data{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}
table.data th,table.data td{padding:4px 10px;border-bottom:1px solid #eaeef2;text-align:left;vertical-align:top;white-space:nowrap}
table.data th{background:#f6f8fa;font-weight:600;white-space:normal;overflow-wrap:normal;word-break:normal;hyphens:manual;min-width:4.5em;vertical-align:bottom}
table.data .num{text-align:right}
table.data td.text{white-space:normal;min-width:16em;max-width:34em;overflow-wrap:normal}
table.data tbody tr:nth-child(even){background:#fbfcfd}
table.data tr:target{background:#fff3bf}
.verdict{font-weight:600}.verdict.pass{color:#1a7f37}.verdict.warn{color:#9a6700}.verdict.fail{color:#cf222e}.verdict.na{color:#656d76}
figure{margin:1em 0}figure.chart{overflow-x:auto}figure.chart img{max-width:100%;height:auto;display:block}
@media (max-width:600px){body{font-size:14px;padding:.6em .7em 2em}h1{font-size:1.4em}table.data{font-size:12px}
table.data th,table.data td{padding:3px 6px}table.data td.text{min-width:12em}
figure.chart img{max-width:none;width:600px}}
"""
