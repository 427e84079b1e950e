"""The live view in a terminal (Textual): a capture while it grows.

Sessions with their transport, era and state; calls in flight with their elapsed time; per method
and tool the count, p50, p95 and errors; violations and errors as they come; the last events,
scrollable. Keys filter the events, calls in flight and problems by session (`s`), method or tool
(`m`) and direction (`d`), `a` shows all again, `p` (or space) pauses the screen while the trace
is still read and counted; `q` leaves (exit 0), Ctrl-C leaves as Ctrl-C does in a terminal (a
SIGINT to the foreground job: exit 130).

The trace is polled every `POLL_SECONDS` and the screen drawn at most every `DRAW_SECONDS` while
events come (the panels' cost does not grow with the rate), so a line on disk is on screen within
about their sum; `mcpbench bench live` measures it.
"""

import asyncio
import os
import signal
import sys
import time
from collections import deque

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from mcpbench import cliutil
from mcpbench.trace.model import ended
from mcpbench.live.feed import LOG_ROWS, FeedRow, LiveFeed, LiveStats, in_flight
from mcpbench.live.lines import STYLES, pieces
from mcpbench.system.processes import STOP_SIGNALS
from mcpbench.protocol.errors import EXIT_INPUT, EnvironmentProblem, TraceError

# How often the trace is read: the first part of a line's way to the screen.
POLL_SECONDS = 0.01
# The least time between two draws while events come: what 10,000 events a second cost to show
# does not depend on their rate (the log draws only its visible lines).
DRAW_SECONDS = 0.025
# Drawn this often anyway: elapsed times of calls in flight, the rate.
IDLE_DRAW_SECONDS = 0.5

# The smallest terminal the panels fit in.
MIN_COLUMNS, MIN_LINES = 80, 24

DIRECTIONS = (None, "c2s", "s2c")


class EventLog(ScrollView, can_focus=True):
    """The last events, filtered, scrollable; it stays at the newest unless scrolled up."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.rows: deque[FeedRow] = deque(maxlen=LOG_ROWS)
        self.sticky = True  # at the newest row: stay there as rows come; scrolled up: stay put

    def reset(self, rows: list[FeedRow]) -> None:
        self.rows.clear()
        self.rows.extend(rows)
        self.sticky = True
        self._resized(dropped=0)

    def extend(self, rows: list[FeedRow]) -> None:
        before = len(self.rows)
        self.rows.extend(rows)
        self._resized(dropped=before + len(rows) - len(self.rows))

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.sticky = new_value >= self.max_scroll_y

    def on_resize(self) -> None:
        self._resized(dropped=0)

    def _resized(self, dropped: int) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows))
        if self.sticky:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
        elif dropped:  # the rows in view moved up as the oldest went
            self.scroll_to(y=max(0, self.scroll_offset.y - dropped), animate=False, immediate=True)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.size.width
        if index >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        segments = list(_line(self.rows[index]).render(self.app.console))
        return Strip(segments).crop(scroll_x, scroll_x + width).extend_cell_length(width).apply_style(self.rich_style)


class LiveApp(App):
    """The live view of one trace (see the module's docstring)."""

    TITLE = "mcpbench live"
    CSS = """
    Screen { layout: vertical; }
    #title { height: 1; background: $primary-background; }
    #keys { height: 1; color: $text-muted; }
    #top { height: 26%; }
    #middle { height: 30%; }
    .panel { border: round $primary; width: 1fr; height: 100%; padding: 0 1; }
    #sessions { width: 3fr; }
    #flight { width: 2fr; }
    #log { border: round $secondary; height: 1fr; overflow-x: hidden; }
    """
    BINDINGS = [
        Binding("q", "leave", "quit", priority=True),
        Binding("ctrl+c", "interrupt", show=False, priority=True),
        Binding("p,space", "pause", "pause"),
        Binding("s", "next_session", "session"),
        Binding("m", "next_method", "method"),
        Binding("d", "next_direction", "direction"),
        Binding("a,escape", "all", "all"),
    ]

    def __init__(self, feed: LiveFeed, first: list | None = None) -> None:
        super().__init__()
        self.feed = feed
        self.stats = LiveStats()
        if first:
            self.stats.take(first)
        self.paused = False
        self.session: str | None = None
        self.method: str | None = None
        self.direction: str | None = None
        self.failure: str | None = None  # why the trace can no longer be followed
        self.interrupted = False
        self._shown = 0  # `stats.logged` when the log last took its new rows
        self._drawn = 0.0
        self._dirty = True
        self._keys: dict[str, object] = {}  # what each panel showed when last drawn

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        with Horizontal(id="top"):
            yield Static(id="sessions", classes="panel")
            yield Static(id="flight", classes="panel")
        with Horizontal(id="middle"):
            yield Static(id="methods", classes="panel")
            yield Static(id="problems", classes="panel")
        yield EventLog(id="log")
        yield Static("q quit  p pause  s session  m method/tool  d direction  a all  ↑↓ PgUp PgDn Home End scroll", id="keys")

    def on_mount(self) -> None:
        for name, title in (("sessions", "sessions"), ("flight", "in flight"), ("methods", "methods and tools"),
                            ("problems", "violations and errors"), ("log", "events")):
            self.query_one(f"#{name}").border_title = title
        self.query_one(EventLog).focus()
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:  # kill -TERM, or a recorder stopping its view: leave cleanly
            loop.add_signal_handler(sig, self._stopped, sig)
        self.tick()
        self.set_interval(POLL_SECONDS, self.tick)

    def _stopped(self, signum: int) -> None:
        cliutil.note_signal(signum)
        self.exit(return_code=cliutil.signal_status(signum))

    # --- reading and drawing ------------------------------------------------------------------

    def tick(self) -> None:
        if self.failure is None:
            try:
                steps = self.feed.poll()
            except TraceError as exc:
                self.failure = str(exc)
                steps = []
            if steps:
                self.stats.take(steps)
                self._dirty = True
        now = time.monotonic()
        if now - self._drawn >= IDLE_DRAW_SECONDS or (self._dirty and now - self._drawn >= DRAW_SECONDS):
            self.draw(now)

    def draw(self, now: float | None = None) -> None:
        self._drawn = time.monotonic() if now is None else now
        self._dirty = False
        self.query_one("#title", Static).update(self._title())
        if self.paused:
            return
        wall = time.time() if self.feed.following else (self.feed.last_ts or time.time())
        # A panel is drawn again only when what it shows changed: most frames at a high rate change
        # the log and the counts, a few rows elsewhere.
        feed, stats = self.feed, self.stats
        filters = (self.session, self.method, self.direction)
        self._update("sessions", (filters, tuple((r.id, r.session.state, r.requests, len(r.open_calls)) for r in feed.sessions.values())[-64:]), self._sessions)
        flight = in_flight(feed)
        self._update("flight", (filters, [(e.id, round(wall - e.ts, 1)) for _, e in flight[:64]], len(flight)), lambda: self._flight(wall, flight))
        self._update("methods", (filters, stats.answered), self._methods)
        self._update("problems", (filters, stats.problems_seen), self._problems)
        log = self.query_one(EventLog)
        log.extend([row for row in stats.new_rows(self._shown) if self._matches(row)])
        self._shown = stats.logged

    def _update(self, name: str, key: object, build) -> None:
        widget = self.query_one(f"#{name}", Static)
        key = (key, widget.content_size)  # a resized panel shows more or fewer rows
        if self._keys.get(name) != key:
            self._keys[name] = key
            widget.update(build())

    def _title(self) -> Text:
        """State, counts, filters and pause first: the path, last, is what a narrow screen cuts."""
        feed, stats = self.feed, self.stats
        title = Text.assemble(("mcpbench live  ", "bold"))
        if self.failure:
            title.append(f"stopped: {self.failure}", "bold red")
        elif feed.header is None:
            title.append("waiting for the trace's first line", "yellow")
        elif feed.ended:
            title.append(feed.ended, "yellow")
        else:
            title.append("following" + (f" (catching up: {feed.tail.behind // 1024} KiB to read)" if feed.tail.behind else ""), "green")
        title.append(f"  {stats.events} events  {stats.rate():.0f}/s  {len(feed.sessions)} sessions")
        filters = [f"{name}={value}" for name, value in (("session", self.session), ("method", self.method), ("dir", self.direction)) if value]
        if filters:
            title.append("  filter: " + " ".join(filters), "cyan")
        if self.paused:
            title.append(f"  PAUSED ({stats.logged - self._shown} new events)", "bold reverse")
        title.append(f"  {feed.path}", "dim")
        return title

    def _height(self, name: str) -> int:
        return max(1, self.query_one(f"#{name}").content_size.height - 1)  # less the table's header

    def _sessions(self) -> Table:
        table = _table("session", "transport", "era", "state", "calls", "in flight", widths=(12, 15, 22, 11, 5, 9))
        reports = list(self.feed.sessions.values())[-self._height("sessions") :]
        for report in reversed(reports):
            core = report.session
            era = f"{core.version or '?'} ({core.era.value if core.era else '?'})"
            style = "reverse" if report.id == self.session else "dim" if ended(report) else ""
            table.add_row(report.id[:12], report.transport, era, core.state.value, str(report.requests), str(len(report.open_calls)), style=style)
        return table

    def _flight(self, wall: float, flight: list) -> Table:
        table = _table("session", "call", "id", "elapsed")
        calls = [(key, entry) for key, entry in flight if self._matches(FeedRow(key, entry))]
        for key, entry in calls[: self._height("flight")]:
            table.add_row(key[:12], entry.name, str(entry.id), f"{max(0.0, wall - entry.ts):.1f} s")
        self.query_one("#flight").border_title = f"in flight ({len(calls)})"
        return table

    def _methods(self) -> Table:
        table = _table("method / tool", "count", "errors", "p50 ms", "p95 ms")
        ranked = sorted(self.stats.methods.items(), key=lambda item: -item[1].count)
        for name, stats in ranked[: self._height("methods")]:
            p50 = p95 = "-"
            if stats.latency is not None:
                p50, p95 = (f"{stats.latency.percentile(q) * 1000:.2f}" for q in (50, 95))
            style = "reverse" if name == self.method else ""
            table.add_row(name, str(stats.count), Text(str(stats.errors), "red" if stats.errors else ""), p50, p95, style=style)
        return table

    def _problems(self) -> Group:
        rows = [row for row in self.stats.problems if self._matches(row)][-(self._height("problems") + 1) :]
        self.query_one("#problems").border_title = f"violations and errors ({len(self.stats.problems)})"
        return Group(*(_line(row, overflow="ellipsis") for row in rows))

    def _matches(self, row: FeedRow) -> bool:
        return (
            (self.session is None or row.session == self.session)
            and (self.method is None or row.entry.name == self.method)
            and (self.direction is None or row.dir == self.direction)
        )

    def _refilter(self) -> None:
        self._keys.clear()
        self.query_one(EventLog).reset([row for row in self.stats.log if self._matches(row)])
        self._shown = self.stats.logged
        self.draw()

    # --- keys -------------------------------------------------------------------------------------

    def action_leave(self) -> None:
        self.exit(return_code=EXIT_INPUT if self.failure else 0)

    def action_interrupt(self) -> None:
        self.interrupted = True
        self.exit(return_code=cliutil.signal_status(signal.SIGINT))

    def action_pause(self) -> None:
        self.paused = not self.paused
        if not self.paused:
            self._refilter() if self.stats.logged - self._shown > LOG_ROWS else self.draw()
        else:
            self.draw()

    def action_next_session(self) -> None:
        self.session = _next(self.session, list(self.feed.sessions))
        self._refilter()

    def action_next_method(self) -> None:
        self.method = _next(self.method, list(self.stats.methods))
        self._refilter()

    def action_next_direction(self) -> None:
        self.direction = DIRECTIONS[(DIRECTIONS.index(self.direction) + 1) % len(DIRECTIONS)]
        self._refilter()

    def action_all(self) -> None:
        self.session = self.method = self.direction = None
        self._refilter()


def _line(row: FeedRow, **options) -> Text:
    return Text.assemble(*((text, STYLES.get(style, "")) for text, style in pieces(row)), no_wrap=True, **options)


def _next(current: str | None, choices: list[str]) -> str | None:
    """The choice after `current`, then None (no filter), then the first again."""
    if not choices:
        return None
    if current not in choices:
        return choices[0] if current is None else None
    index = choices.index(current) + 1
    return choices[index] if index < len(choices) else None


def _table(*columns: str, widths: tuple[int, ...] = ()) -> Table:
    """A table without lines; `widths`: the columns' least widths (the text they must show whole)."""
    table = Table(box=None, expand=True, pad_edge=False, show_edge=False, header_style="bold")
    for index, column in enumerate(columns):
        table.add_column(column, no_wrap=True, overflow="ellipsis", min_width=widths[index] if index < len(widths) else None)
    return table


def terminal_problem() -> str | None:
    """Why this terminal cannot show the view (too small), or None."""
    try:
        size = os.get_terminal_size(sys.__stderr__.fileno())
    except OSError:
        return "no terminal size"
    if size.columns < MIN_COLUMNS or size.lines < MIN_LINES:
        return (
            f"the terminal is {size.columns}x{size.lines}; the live view needs at least {MIN_COLUMNS}x{MIN_LINES} "
            "(enlarge it, or pipe the output for one line per event)"
        )
    return None


def run_view(feed: LiveFeed, first: list | None = None) -> int:
    """Show `feed` until `q` (0), Ctrl-C (130, as a SIGINT) or a stop signal; the exit status.

    Raises:
        EnvironmentProblem: the terminal is too small (exit 3).
    """
    if problem := terminal_problem():
        raise EnvironmentProblem(problem)
    app = LiveApp(feed, first)
    app.run(mouse=False)
    if app.failure:
        print(f"mcpbench: {app.failure}", file=sys.stderr, flush=True)
    if app.interrupted:
        _interrupt()
    return app.return_code or 0


def _interrupt() -> None:
    """Ctrl-C in the view (the terminal was in raw mode): what it does in a terminal, now that the
    terminal is restored, a SIGINT to the foreground job (a recorder that opened the view stops too)."""
    try:
        foreground = os.tcgetpgrp(sys.__stdin__.fileno()) == os.getpgrp()
    except OSError:
        foreground = False
    if foreground:
        os.killpg(os.getpgrp(), signal.SIGINT)
    else:
        os.kill(os.getpid(), signal.SIGINT)
