"""The sticky-session experiment: a matrix of transports, policies and instance counts, measured.

A sticky scenario is a load scenario without a target, plus the lab's lists::

    modes: [legacy-sse, stateful-sse, stateful-json, stateless, 2026-07-28]
    policies: [round-robin, sticky, source]
    instances: [1, 3]
    balancers: [builtin, haproxy]
    calls_per_session: 4           # and any other load scenario key (mix, users, duration, timeout …)

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mcpbench.lab.experiments.matrix import Matrix
from mcpbench.load.scenario import ScenarioError
from mcpbench.load.sessions import SessionTally, count_sessions, ordered_classes, read_samples, verdict
from mcpbench.protocol.versions import LATEST_HANDSHAKE, V2026_07_28, has_handshake, has_method

# mode -> (transport, json_response, stateless, protocol version)
MODES: Final = {
    "legacy-sse": ("sse", False, False, LATEST_HANDSHAKE),
    "stateful-sse": ("streamable-http", False, False, LATEST_HANDSHAKE),
    "stateful-json": ("streamable-http", True, False, LATEST_HANDSHAKE),
    "stateless": ("streamable-http", False, True, LATEST_HANDSHAKE),
    # 2026-07-28 has no sessions: a stateful server shows that it needs none.
    "2026-07-28": ("streamable-http", False, False, V2026_07_28),
}
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
class Cell:
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
        return BREAK if stateful and self.instances > 1 and self.policy in SPREADING else HOLD


@dataclass(frozen=True)
class StickyPlan:
    """A parsed sticky scenario: the cells and the load scenario each one runs."""

    cells: tuple[Cell, ...]
    scenario: Any  # mcpbench.load.scenario.Scenario, with a placeholder target


@dataclass
class CellResult(SessionTally):
    """One row of sticky.csv: a cell's sessions."""

    cell: Cell | None = None

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

    modes = names("modes", MODES, list(MODES))
    policies = names("policies", POLICIES, ["round-robin", "sticky", "source"])
    counts = names("instances", (), [1, 3])
    balancers = names("balancers", BALANCERS, ["builtin"])
    scenario = matrix.scenario("session_per_task")
    pingless = [MODES[mode][3] for mode in modes if not has_method(MODES[mode][3], "ping")]
    if any(c.method == "ping" for c in scenario.mix) and pingless:
        raise ScenarioError(f"{source}: ping does not exist in {pingless[0]} (drop it from the mix or the mode)")
    cells = tuple(Cell(m, p, b, n) for m, p, b, n in itertools.product(modes, policies, balancers, counts))
    return StickyPlan(cells, scenario)


# --- the measurements ---------------------------------------------------------------------------


def cell_stats(cell: Cell, records: Iterable[dict]) -> CellResult:
    """One cell's row from its step records (those without a session tag are not counted)."""
    return count_sessions(records, CellResult(cell=cell))


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
    lines = [f"{'transport':<16} {'mode':<14} {'policy':<12} {'balancer':<8} {'inst':>4} {'sessions':>8} {'failed':>13} {'calls':>6} {'failed':>6} {'1st inst':>8}  failures"]
    for r in results:
        rate = f"{r.failed_sessions} ({100 * r.failed_sessions / r.sessions:.0f}%)" if r.sessions else "-"
        share = "" if r.first_instance_share is None else f"{r.first_instance_share:.2f}"
        forms = "; ".join(f"{form} ×{n}" for form, n in r.forms.most_common(2))
        lines.append(
            f"{r.cell.transport:<16} {r.cell.mode:<14} {r.cell.policy:<12} {r.cell.balancer:<8} {r.cell.instances:>4} "
            f"{r.sessions:>8} {rate:>13} {r.calls:>6} {r.failed_calls:>6} {share:>8}  {forms}"
        )
    return "\n".join(lines)


def plot(results: list[CellResult], ax: Any) -> Any:
    """Failed sessions per cell (%), horizontal bars split by failure class, cells grouped by transport.

    Horizontal, so that a matrix of dozens of cells keeps readable labels (one line per cell).
    """
    colors = {"session-not-found": "#c44e52", "answer-lost": "#dd8452", "stream-closed": "#8172b3", "timeout": "#937860"}
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
    lefts = [0.0] * len(ordered)
    for name in classes:
        widths = [100.0 * r.sessions_by_class.get(name, 0) / r.sessions if r.sessions else 0.0 for r in ordered]
        ax.barh(positions, widths, 0.75, left=lefts, label=name, color=colors.get(name))
        lefts = [a + w for a, w in zip(lefts, widths)]
    for pos, total, r in zip(positions, lefts, ordered):
        ax.text(total + 1, pos, f"{total:.0f}% of {r.sessions}", va="center", fontsize=7)
    for transport, pos in groups.items():
        ax.text(0, pos, TRANSPORT_TITLES.get(transport, transport), va="center", fontsize=10, fontweight="bold")
    ax.set_yticks(positions, labels, fontsize=8)
    ax.set_ylim(y - 0.4, -0.6)  # first cell on top
    ax.set_xlim(0, 118)
    ax.set_xlabel("failed sessions (% of the cell's sessions)")
    ax.set_ylabel("cell: mode · balancer policy · balancer × instances")
    ax.set_title("Sessions behind a balancer: failed sessions per cell, by failure class")
    ax.grid(axis="x", alpha=0.3)
    if classes:
        ax.legend(title="first failure of a session", loc="lower right", fontsize=8)
    else:
        ax.text(50, y / 2, "no session failed", ha="center")
    return ax


def write_chart(results: list[CellResult], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mcpbench.outputs import atomic_path

    fig, ax = plt.subplots(figsize=(11, max(4.0, 0.24 * len(results) + 2.0)))
    plot(results, ax)
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
    """Run every cell of `plan`, writing `sticky.csv`, `sticky.png` and the cells' load results into `folder`.

    Cells on HAProxy are skipped (with a line said) when `haproxy` is not on PATH.
    """
    from mcpbench.lab.topology.cluster import haproxy_path, running_balancer, running_instances
    from mcpbench.load.runner import run_scenario
    from mcpbench.outputs import write_atomic

    cells = list(plan.cells)
    if haproxy_path() is None and any(c.balancer == "haproxy" for c in cells):
        say("mcpbench: haproxy is not on PATH: its cells are skipped")
        cells = [c for c in cells if c.balancer != "haproxy"]
    results: list[CellResult] = []
    groups: dict[tuple, list[Cell]] = defaultdict(list)
    for cell in cells:
        groups[MODES[cell.mode][:3]].append(cell)
    for (transport, json_response, stateless), group in groups.items():
        most = max(c.instances for c in group)
        with running_instances(most, transport, json_response=json_response, stateless=stateless) as servers:
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
    return results


def _target(url: str, transport: str) -> str:
    return f"sse+{url}" if transport == "sse" else url

