"""One line per event, as the live view's log and its pipe mode (`tail -f`) show it.

A line is a list of (text, style) pieces: the pipe mode joins the texts, the view styles them.

    12:00:01.234 1cf27fe7153f → tools/call echo #3
    12:00:01.239 1cf27fe7153f ← tools/call echo #3  4.36 ms ok
    12:00:01.240 1cf27fe7153f ← ! stdout-pollution: not JSON: …
"""

import time

from mcpbench.live.feed import ERRORS, FeedRow

ARROWS = {"c2s": "→", "s2c": "←", None: " "}

# The most of a detail (an error message, a stderr line) a line shows.
DETAIL_CHARS = 160

# Styles by what a line says (Rich style names).
STYLES = {"ok": "green", "error": "bold red", "warn": "yellow", "dim": "dim", "name": "bold", "id": "cyan"}

Piece = tuple[str, str]


def clock(ts: float) -> str:
    """Local wall-clock time with milliseconds."""
    return time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int(ts * 1000) % 1000:03d}"


def pieces(row: FeedRow) -> list[Piece]:
    """The line of one log row."""
    entry = row.entry
    out: list[Piece] = [(clock(row.ts), "dim"), (" ", ""), (row.session[:12], "dim"), (" ", ""), (ARROWS.get(row.dir, " "), ""), (" ", "")]
    kind = entry.kind
    if kind == "request":
        out.append((entry.name, "name"))
        if entry.id is not None:
            out.append((f" #{entry.id}", "id"))
        if row.answer:
            latency = f"  {entry.latency * 1000:.2f} ms" if entry.latency is not None else ""
            style = "error" if entry.outcome in ERRORS else "ok" if entry.outcome == "ok" else "warn"
            out += [(latency, ""), (f" {entry.outcome}", style)]
            if entry.detail:
                out.append((f": {entry.detail[:DETAIL_CHARS]}", style))
    elif kind == "notification":
        out.append((entry.name, ""))
    elif kind == "violation":
        out.append((f"! {entry.name}: {entry.detail[:DETAIL_CHARS]}", "warn"))
    elif kind == "warning":
        out.append((f"warning {entry.name}: {entry.detail[:DETAIL_CHARS]}", "dim"))
    elif kind == "stderr":
        out.append((f"stderr: {entry.detail[:DETAIL_CHARS]}", "dim"))
    elif kind == "process":
        out.append((f"process {entry.name}: {entry.detail}", "dim"))
    elif kind == "http":
        out.append((f"http {entry.name} {entry.outcome}", "error"))
    elif kind == "stream":
        out.append((entry.name + (f": {entry.detail[:DETAIL_CHARS]}" if entry.detail else ""), "dim"))
    else:  # error, an answer to no request in flight
        out.append((f"{entry.kind} {entry.name}" + (f": {entry.detail[:DETAIL_CHARS]}" if entry.detail else ""), "error"))
    return out


def text(row: FeedRow) -> str:
    """The line of one log row, as plain text."""
    return "".join(piece for piece, _ in pieces(row))
