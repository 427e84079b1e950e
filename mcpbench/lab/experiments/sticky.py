"""The sticky-session experiment: a matrix of transports, policies and instance counts, measured.

A sticky scenario is a load scenario without a target, plus the lab's lists::

    modes: [legacy-sse, stateful-sse, stateful-json, stateless, 2026-07-28]
    policies: [round-robin, sticky, source]
    instances: [1, 3]
    balancers: [builtin, haproxy]
    calls_per_session: 4           # and any other load scenario key (mix, users, duration, timeout …)

Two modes put 2026-07-28's own routing question to the test (`scenarios/sticky-state.yaml`): the
instances seal `ask`'s `requestState` and keep `work`'s tasks per process (`2026-07-28-per-process`:
the SDK's default key, tasks in memory) or share one key and one task store (`2026-07-28-shared`).
Behind a balancer that spreads requests, a retry or a poll that reaches another instance fails
under the first (`state-rejected`, `task-not-found`: a poll on an instance that never saw the task) and not under the second; `sticky-state.png`
draws those cells' operations, failed by class, beside the session matrix (`sticky.png`).

Each cell (mode × policy × balancer × instance count) is a bounded load run of many short sessions
(`session_per_task`, every user on its own loopback source address) by the load users in their
own Locust process (`load.runner.run_scenario`), through a balancer in front of the mode's
instances. The samples say which session every step belongs to and which instance answered it
(`X-Mcpbench-Instance`); `cell_stats` tallies them by session (`load/sessions.py`, which also
names the failure classes) into one row of `sticky.csv`.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mcpbench.lab.experiments.matrix import Matrix
from mcpbench.load.scenario import ScenarioError
from mcpbench.load.sessions import (
    NOT_CALLS,
    SessionTally,
    count_sessions,
    failure_class,
    ordered_classes,
    read_samples,
    verdict,
)
from mcpbench.protocol.versions import LATEST_HANDSHAKE, V2026_07_28, has_handshake, has_method

# mode -> (transport, json_response, stateless, protocol version)
MODES: Final = {
    "legacy-sse": ("sse", False, False, LATEST_HANDSHAKE),
    "stateful-sse": ("streamable-http", False, False, LATEST_HANDSHAKE),
    "stateful-json": ("streamable-http", True, False, LATEST_HANDSHAKE),
    "stateless": ("streamable-http", False, True, LATEST_HANDSHAKE),
    # 2026-07-28 has no sessions: a stateful server shows that it needs none.
    "2026-07-28": ("streamable-http", False, False, V2026_07_28),
    # ... but a requestState sealed with a key of one process, and tasks kept by one, are routing again.
    "2026-07-28-per-process": ("streamable-http", False, False, V2026_07_28),
    "2026-07-28-shared": ("streamable-http", False, False, V2026_07_28),
}
# The modes a sticky scenario runs when it names none (the state modes need a mix that calls ask and work).
DEFAULT_MODES: Final = ("legacy-sse", "stateful-sse", "stateful-json", "stateless", "2026-07-28")
# mode -> how its instances keep what a retry or a poll needs (`lab serve --seal-state`, `--task-store`).
PER_PROCESS, SHARED = "2026-07-28-per-process", "2026-07-28-shared"
STATE_MODES: Final = (PER_PROCESS, SHARED)
TASK_STORE: Final = "tasks.db"  # the shared mode's task store, one file in the run's folder for all its instances
POLICIES: Final = ("random", "round-robin", "sticky", "source")
BALANCERS: Final = ("builtin", "haproxy")
TRANSPORT_TITLES: Final = {"sse": "legacy HTTP+SSE", "streamable-http": "Streamable HTTP"}
LAB_KEYS: Final = ("modes", "policies", "instances", "balancers")
CSV_BASE: Final = (
    "transport", "mode", "policy", "balancer", "instances", "sessions", "calls", "failed_calls",
    "failed_sessions", "first_instance_share", "expected",
)
# Balancers that spread one client's requests over the instances (the others keep a client on one).
SPREADING: Final = ("random", "round-robin")
HOLD, BREAK = "hold", "break"  # the `expected` column: what the cell's sessions should do


@dataclass(frozen=True)
class StickyCell:
    mode: str
    policy: str
    balancer: str
    instances: int

    @property
    def transport(self) -> str:
        return MODES[self.mode][0]

    @property
    def slug(self) -> str:
        return f"{self.mode}-{self.policy}-{self.balancer}-{self.instances}"

    @property
    def expected(self) -> str:
        """What the cell is built to show: sessions break where a session lives in one process's memory
        and the balancer spreads its requests over several; everywhere else they hold. The report
        tells a cell that broke as designed from one that should have held."""
        stateful = MODES[self.mode][2] is False and has_handshake(MODES[self.mode][3])  # 2026-07-28 keeps no sessions
        stateful = stateful or self.mode == PER_PROCESS  # its state and its tasks live in one process
        return BREAK if stateful and self.instances > 1 and self.policy in SPREADING else HOLD


def instance_args(mode: str, folder: Path) -> list[str]:
    """The `lab serve` arguments the instances of `mode` run with (beyond its transport)."""
    if mode == PER_PROCESS:
        return ["--seal-state", "process", "--tasks"]
    if mode == SHARED:
        return ["--seal-state", "shared", "--tasks", "--task-store", str(folder / TASK_STORE)]
    return []


@dataclass(frozen=True)
class StickyPlan:
    """A parsed sticky scenario: the cells and the load scenario each one runs."""

    cells: tuple[StickyCell, ...]
    scenario: Any  # mcpbench.load.scenario.Scenario, with a placeholder target


@dataclass
class CellResult(SessionTally):
    """One row of sticky.csv: a cell's sessions (and, for `sticky-state.png`, its steps by name and how they failed)."""

    cell: StickyCell | None = None
    steps: Counter = field(default_factory=Counter)  # step name -> steps made
    step_failures: Counter = field(default_factory=Counter)  # (step name, failure class) -> steps failed

    def row(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "transport": self.cell.transport, "mode": self.cell.mode, "policy": self.cell.policy,
            "balancer": self.cell.balancer, "instances": self.cell.instances, "sessions": self.sessions,
            "calls": self.calls, "failed_calls": self.failed_calls, "failed_sessions": self.failed_sessions,
            "first_instance_share": "" if self.first_instance_share is None else round(self.first_instance_share, 4),
            "expected": self.cell.expected,
        }
        for name in ordered_classes(self.calls_by_class | self.sessions_by_class):
            row[f"failed_calls:{name}"] = self.calls_by_class.get(name, 0)
            row[f"failed_sessions:{name}"] = self.sessions_by_class.get(name, 0)
        return row


# --- the scenario -------------------------------------------------------------------------------


def plan_from_node(root: Any, source: str) -> StickyPlan:
    matrix = Matrix.read(root, source, "sticky", LAB_KEYS, shape="modes, policies, instances, mix, …")

    def names(key: str, allowed: Iterable[str], default: list) -> list:
        items = matrix.items(key)
        if items is None:
            return default
        if not items or len(set(map(str, items))) != len(items):
            raise ScenarioError(f"{matrix.where(key)}: {key}: list each value once")
        for item in items:
            if allowed and str(item) not in allowed:
                raise ScenarioError(f"{matrix.where(key)}: {key}: unknown {item!r} (one of {', '.join(allowed)})")
            if not allowed and (isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= 16):
                raise ScenarioError(f"{matrix.where(key)}: {key}: {item!r} is not a count from 1 to 16")
        return [item if not allowed else str(item) for item in items]

    modes = names("modes", MODES, list(DEFAULT_MODES))
    policies = names("policies", POLICIES, ["round-robin", "sticky", "source"])
    counts = names("instances", (), [1, 3])
    balancers = names("balancers", BALANCERS, ["builtin"])
    scenario = matrix.scenario("session_per_task")
    pingless = [MODES[mode][3] for mode in modes if not has_method(MODES[mode][3], "ping")]
    if any(c.method == "ping" for c in scenario.mix) and pingless:
        raise ScenarioError(f"{source}: ping does not exist in {pingless[0]} (drop it from the mix or the mode)")
    cells = tuple(StickyCell(m, p, b, n) for m, p, b, n in itertools.product(modes, policies, balancers, counts))
    return StickyPlan(cells, scenario)


# --- the measurements ---------------------------------------------------------------------------


def cell_stats(cell: StickyCell, records: Iterable[dict]) -> CellResult:
    """One cell's row from its step records (those without a session tag are not counted)."""
    records = [r for r in records if r.get("session")]
    result = count_sessions(records, CellResult(cell=cell))
    for record in records:
        if record["step"] in NOT_CALLS:
            continue
        result.steps[record["step"]] += 1
        if record.get("failure"):
            result.step_failures[(record["step"], failure_class(record["failure"], record.get("detail")))] += 1
    return result


# --- outputs ------------------------------------------------------------------------------------


def csv_text(results: Iterable[CellResult]) -> str:
    results = list(results)
    classes = ordered_classes(itertools.chain.from_iterable(r.calls_by_class | r.sessions_by_class for r in results))
    columns = list(CSV_BASE) + [f"{kind}:{name}" for name in classes for kind in ("failed_calls", "failed_sessions")]
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, restval=0, lineterminator="\n")
    writer.writeheader()
    for result in results:
        writer.writerow(result.row())
    return out.getvalue()


def render(results: Iterable[CellResult]) -> str:
    """The table printed at the end of a run."""
    lines = [f"{'transport':<16} {'mode':<22} {'policy':<12} {'balancer':<8} {'inst':>4} {'sessions':>8} {'failed':>13} {'calls':>6} {'failed':>6} {'1st inst':>8}  failures"]
    for r in results:
        rate = f"{r.failed_sessions} ({100 * r.failed_sessions / r.sessions:.0f}%)" if r.sessions else "-"
        share = "" if r.first_instance_share is None else f"{r.first_instance_share:.2f}"
        forms = "; ".join(f"{form} ×{n}" for form, n in r.forms.most_common(2))
        lines.append(
            f"{r.cell.transport:<16} {r.cell.mode:<22} {r.cell.policy:<12} {r.cell.balancer:<8} {r.cell.instances:>4} "
            f"{r.sessions:>8} {rate:>13} {r.calls:>6} {r.failed_calls:>6} {share:>8}  {forms}"
        )
    state = [r for r in results if r.cell.mode in STATE_MODES]
    if state:
        lines.append("")
        lines.append("2026-07-28 state behind the balancer: steps failed, by step")
        for r in state:
            parts = [_step_line(r, step) for step in sorted(r.steps)]
            lines.append(f"  {r.cell.slug}: {'; '.join(parts) or 'no step'}")
    return "\n".join(lines)


def _step_line(result: CellResult, step: str) -> str:
    failed = {name: n for (s, name), n in result.step_failures.items() if s == step}
    said = ", ".join(f"{n} {name}" for name, n in sorted(failed.items())) if failed else "none failed"
    return f"{step} {sum(failed.values())}/{result.steps[step]} ({said})"


def plot(results: list[CellResult], ax: Any) -> Any:
    """Failed sessions per cell (%), horizontal bars split by failure class, cells grouped by transport.

    Horizontal, so that a matrix of dozens of cells keeps readable labels (one line per cell).
    """
    colors = {"session-not-found": "#c44e52", "answer-lost": "#dd8452", "stream-closed": "#8172b3", "timeout": "#937860",
              "state-rejected": "#da8bc3", "task-not-found": "#8c8c8c", "task-expired": "#4c4c4c"}
    classes = ordered_classes(itertools.chain.from_iterable(r.sessions_by_class for r in results))
    ordered = sorted(results, key=lambda r: r.cell.transport != "sse")  # stable: the plan's order within a transport
    positions, labels, y, previous, groups = [], [], 0.0, None, {}
    for r in ordered:
        if r.cell.transport != previous:
            y += 0.0 if previous is None else 0.8  # a gap, then the group's title row
            groups[r.cell.transport] = y
            y += 1.0
        previous = r.cell.transport
        positions.append(y)
        labels.append(f"{r.cell.mode} · {r.cell.policy} · {r.cell.balancer} ×{r.cell.instances}")
        y += 1.0
    shares = {name: [100.0 * r.sessions_by_class.get(name, 0) / r.sessions if r.sessions else 0.0 for r in ordered]
              for name in classes}
    _stacked(ax, positions, labels, shares, [r.sessions for r in ordered], colors, 0.75, y)
    for transport, pos in groups.items():
        ax.text(0, pos, TRANSPORT_TITLES.get(transport, transport), va="center", fontsize=10, fontweight="bold")
    ax.set_xlabel("failed sessions (% of the cell's sessions)")
    ax.set_ylabel("cell: mode · balancer policy · balancer × instances")
    ax.set_title("Sessions behind a balancer: failed sessions per cell, by failure class")
    if classes:
        ax.legend(title="first failure of a session", loc="lower right", fontsize=8)
    else:
        ax.text(50, y / 2, "no session failed", ha="center")
    return ax


def _stacked(ax: Any, positions: list, labels: list[str], shares: dict[str, list[float]], counts: list[int], colors: dict,
             height: float, bottom: float) -> None:
    """Horizontal bars at `positions`, stacked by class (`shares`: class -> % per bar), each labelled
    with its total and its count; the first bar on top, `bottom` the last row's position + 1."""
    lefts = [0.0] * len(positions)
    for name, widths in shares.items():
        ax.barh(positions, widths, height, left=lefts, label=name, color=colors.get(name))
        lefts = [a + w for a, w in zip(lefts, widths)]
    for pos, total, count in zip(positions, lefts, counts):
        ax.text(total + 1, pos, f"{total:.0f}% of {count}", va="center", fontsize=7)
    ax.set_yticks(positions, labels, fontsize=8)
    ax.set_ylim(bottom - 0.4, -0.6)  # first bar on top
    ax.set_xlim(0, 118)
    ax.grid(axis="x", alpha=0.3)


def plot_state(results: list[CellResult], ax: Any) -> Any:
    """The state modes' cells: each step of each cell (ask's rounds, work's task), the share of its
    operations that failed, split by failure class (`state-rejected`, `task-not-found`, …)."""
    colors = {"state-rejected": "#c44e52", "task-not-found": "#dd8452", "task-expired": "#8c8c8c"}
    rows = [(r, step) for r in results for step in sorted(r.steps)]
    classes = ordered_classes(name for r in results for (_, name) in r.step_failures)
    shares = {name: [100.0 * r.step_failures.get((step, name), 0) / r.steps[step] for r, step in rows] for name in classes}
    labels = [f"{r.cell.mode} · {r.cell.policy} · {r.cell.balancer} ×{r.cell.instances} · {step}" for r, step in rows]
    _stacked(ax, list(range(len(rows))), labels, shares, [r.steps[step] for r, step in rows], colors, 0.7, len(rows))
    ax.set_xlabel("failed operations (% of the step's operations)")
    ax.set_title("2026-07-28 behind a balancer: requestState and tasks per process vs shared")
    if classes:
        ax.legend(title="failure class", loc="lower right", fontsize=8)
    else:
        ax.text(50, len(rows) / 2, "no operation failed", ha="center")
    return ax


def write_chart(results: list[CellResult], path: Path, draw: Callable[[list[CellResult], Any], Any] = plot) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mcpbench.files.outputs import atomic_path

    rows = sum(len(r.steps) for r in results) if draw is plot_state else len(results)
    fig, ax = plt.subplots(figsize=(11, max(4.0, 0.24 * rows + 2.0)))
    draw(results, ax)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return path


# --- the run ------------------------------------------------------------------------------------


def run_plan(
    plan: StickyPlan,
    folder: Path,
    *,
    say: Callable[[str], None] = print,
) -> list[CellResult]:
    """Run every cell of `plan`, writing `sticky.csv`, `sticky.png` (and `sticky-state.png` when the plan has
    the 2026-07-28 state modes) and the cells' load results into `folder`.

    Cells on HAProxy are skipped (with a line said) when `haproxy` is not on PATH.
    """
    from mcpbench.lab.topology.cluster import haproxy_path, running_balancer, running_instances
    from mcpbench.load.runner import run_scenario
    from mcpbench.files.outputs import write_atomic

    cells = list(plan.cells)
    if haproxy_path() is None and any(c.balancer == "haproxy" for c in cells):
        say("mcpbench: haproxy is not on PATH: its cells are skipped")
        cells = [c for c in cells if c.balancer != "haproxy"]
    results: list[CellResult] = []
    groups: dict[tuple, list[StickyCell]] = defaultdict(list)
    for cell in cells:
        groups[(*MODES[cell.mode][:3], tuple(instance_args(cell.mode, folder)))].append(cell)
    folder.mkdir(parents=True, exist_ok=True)
    for (transport, json_response, stateless, args), group in groups.items():
        most = max(c.instances for c in group)
        with running_instances(most, transport, json_response=json_response, stateless=stateless, extra_args=args) as servers:
            for cell in group:
                cell_dir = folder / "cells" / cell.slug
                with running_balancer(cell.balancer, cell.policy, transport, servers[: cell.instances], folder=cell_dir) as front:
                    scenario = plan.scenario.with_overrides(
                        target=_target(front.url, transport), versions=(MODES[cell.mode][3],),
                        distinct_sources=True, name=cell.slug,
                        exit_code_on_error=0,  # broken sessions are what the cell measures
                    )
                    if run_scenario(scenario, cell_dir, check_target=False, echo=say).summary.get("interrupted"):
                        raise KeyboardInterrupt  # the load run stopped on a signal: so does the experiment
                result = cell_stats(cell, read_samples(cell_dir / "samples.jsonl"))
                results.append(result)
                say(f"mcpbench: {cell.slug}: {verdict(result)}")
    write_atomic(folder / "sticky.csv", csv_text(results).encode())
    if results:
        write_chart(results, folder / "sticky.png")
    state = [r for r in results if r.cell.mode in STATE_MODES]
    if state:
        write_chart(state, folder / "sticky-state.png", plot_state)
    return results


def _target(url: str, transport: str) -> str:
    return f"sse+{url}" if transport == "sse" else url

