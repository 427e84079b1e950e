"""The reconnect experiment: faults injected on purpose, reconnect policies measured and charted.

A reconnect scenario is a load scenario without a target, plus the lab's lists::

    transports: [streamable-http, sse, stdio]
    faults:                                  # name -> what the lab injects (names are free)
      cut: {cut_streams_after: 1s}           # the stream cut (stdio: kill_after_messages)
      restart: {restart_at: 8s}              # the instance killed and started again
      drop: {drop: 10%, drop_as: "503"}      # a share of requests dropped
    window: [5s, 11s]                        # faults from A to B after the lab starts: before, during, after
    policies: [none, reinitialize, resume]   # the load users' `reconnect:` policy per cell
    sdk_client: true                         # the official SDK client under the same faults, too
    reconnect: {idempotent: [echo]}          # the rest of the policy, shared by every cell
    era: [handshake, 2026-07-28]             # each era its own cells (`<policy>@2026-07-28`)
    mix: …, users: 2, duration: 14s          # and any other load scenario key

Each cell (transport × fault × policy × era, and transport × fault for the SDK client) is a bounded
run against one reference-server instance behind the built-in balancer, which injects the
fault and logs each one (`faults.jsonl`). The load users write one `{"reconnect": …}` record
per break next to their samples; `cell_row` turns a cell's files into one row of
`reconnect.csv`, and `analysis.charts` draws `reconnect-timeline.png` and `recovery.png`.

A 2026-07-28 cell's policy is labelled `<policy>@2026-07-28` (its series and folder): the era has no
session to start again nor stream to resume, and reissues a broken request with a new id under
`reinitialize` and `resume` alike (`protocol/reconnect.py`), so its series stand beside the handshake
era's in the same charts. The SDK client runs in the handshake era only.
"""

from __future__ import annotations

import csv
import io
import itertools
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from mcpbench.measures.durations import parse_duration
from mcpbench.lab.experiments.matrix import Matrix
from mcpbench.load.samples import records
from mcpbench.load.scenario import ScenarioError
from mcpbench.protocol.reconnect import MODES as POLICIES
from mcpbench.protocol.reconnect import ReconnectPolicy
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.protocol.versions import has_handshake, has_legacy_sse
from mcpbench.measures.stats import percentile

TRANSPORTS: Final = (STREAMABLE_HTTP, LEGACY_SSE, STDIO)
LAB_KEYS: Final = ("transports", "faults", "window", "policies", "sdk_client")
# What a fault may set: the fault addon's options, a restart time, and stdio's kill.
FAULT_KEYS: Final = ("cut_streams_after", "idle_timeout", "drop", "drop_as", "delay", "seed", "restart_at",
                     "restart_every", "kill_after_messages")
HTTP_FAULTS: Final = frozenset(FAULT_KEYS) - {"kill_after_messages"}
SDK: Final = "sdk"  # the policy column of the SDK client's cells
# Extra seconds an SDK client run may take over the cell's duration before it is stopped.
SDK_GRACE: Final = 30.0
CSV_COLUMNS: Final = (
    "transport", "fault", "policy", "client", "calls", "ok_calls", "failed_calls", "breaks", "recovered_breaks",
    "recover_p50_ms", "recover_p95_ms", "resent", "recovered", "lost", "duplicated", "uncertain",
    "extra_requests", "requests", "extra_share", "budget_denied", "version",
)


@dataclass(frozen=True)
class ReconnectCell:
    transport: str
    fault: str
    policy: str  # a reconnect policy, or "sdk"
    version: str | None = None  # the cell's protocol version: None, the scenario's only one

    @property
    def label(self) -> str:
        """The policy as charts and reconnect.csv name it: `<policy>@<version>` in a sessionless era."""
        return self.policy if self.version is None or has_handshake(self.version) else f"{self.policy}@{self.version}"

    @property
    def slug(self) -> str:
        return f"{self.transport}-{self.fault}-{self.label}"


@dataclass(frozen=True)
class ReconnectPlan:
    cells: tuple[ReconnectCell, ...]
    faults: dict[str, dict[str, str]]
    window: tuple[float, float] | None
    scenario: Any  # mcpbench.load.scenario.Scenario with a placeholder target


def is_reconnect_scenario(root: Any) -> bool:
    """Whether a lab scenario's YAML node is a reconnect experiment (it has `faults`)."""
    import yaml

    return isinstance(root, yaml.MappingNode) and any(isinstance(k, yaml.ScalarNode) and k.value == "faults" for k, _ in root.value)


def plan_from_node(root: Any, source: str) -> ReconnectPlan:
    matrix = Matrix.read(root, source, "reconnect", LAB_KEYS, shape="transports, faults, policies, mix, …")

    def listed(key: str, allowed: Iterable[str], default: list[str]) -> list[str]:
        items = matrix.items(key)
        if items is None:
            return default
        items = [str(v) for v in items]
        bad = [item for item in items if item not in allowed]
        if bad or not items or len(set(items)) != len(items):
            raise ScenarioError(f"{matrix.where(key)}: {key}: expected some of {', '.join(allowed)}, each once")
        return items

    transports = listed("transports", TRANSPORTS, ["streamable-http"])
    policies = listed("policies", POLICIES, list(POLICIES))
    if "faults" not in matrix:
        raise ScenarioError(f"{source}: a reconnect scenario names its faults (faults: {{cut: {{cut_streams_after: 1s}}}})")
    faults_value = matrix.value("faults")
    if not isinstance(faults_value, dict) or not faults_value:
        raise ScenarioError(f"{matrix.where('faults')}: faults: a mapping of names to fault options (cut: {{cut_streams_after: 1s}})")
    faults: dict[str, dict[str, str]] = {}
    for name, options in faults_value.items():
        if not isinstance(options, dict) or not options or any(k not in FAULT_KEYS for k in options):
            raise ScenarioError(f"{matrix.where('faults')}: faults: {name}: options among {', '.join(FAULT_KEYS)}")
        faults[str(name)] = {k: str(v) for k, v in options.items()}
    window = None
    if "window" in matrix:
        value = matrix.value("window")
        try:
            window = (parse_duration(str(value[0]), "window"), parse_duration(str(value[1]), "window"))
        except (TypeError, IndexError, KeyError, ValueError):
            raise ScenarioError(f"{matrix.where('window')}: window: [from, until], like [5s, 11s]") from None
        if not 0 <= window[0] < window[1]:
            raise ScenarioError(f"{matrix.where('window')}: window: the start must come before the end")
    sdk = bool(matrix.value("sdk_client")) if "sdk_client" in matrix else False
    scenario = matrix.scenario("long_lived")
    versions = scenario.versions if len(scenario.versions) > 1 else (None,)
    cells = []
    for transport, fault in itertools.product(transports, faults):
        if not applies(transport, faults[fault]):
            continue
        for version in versions:
            if version is not None and transport == LEGACY_SSE and not has_legacy_sse(version):
                continue  # 2026-07-28 has no legacy SSE transport
            cells += [ReconnectCell(transport, fault, policy, version) for policy in policies]
        if sdk:
            cells.append(ReconnectCell(transport, fault, SDK, next((v for v in versions if v is None or has_handshake(v)), None)))
    if not cells:
        raise ScenarioError(f"{source}: no cell: no fault applies to the transports given")
    return ReconnectPlan(tuple(cells), faults, window, scenario)


def applies(transport: str, options: dict[str, str]) -> bool:
    """stdio takes `kill_after_messages` only; HTTP transports take everything else."""
    keys = set(options)
    return keys <= {"kill_after_messages"} if transport == "stdio" else keys <= HTTP_FAULTS


# --- one cell's row ----------------------------------------------------------------------------


def cell_row(cell: ReconnectCell, folder: Path) -> dict[str, Any]:
    """One row of reconnect.csv from a cell's folder (samples.jsonl or sdk.jsonl)."""
    row: dict[str, Any] = {"transport": cell.transport, "fault": cell.fault, "policy": cell.label,
                           "client": SDK if cell.policy == SDK else "mcpbench", "version": cell.version}
    if cell.policy == SDK:
        calls = list(records(folder / "sdk.jsonl", missing_ok=True))
        failed = [c for c in calls if not c.get("ok")]
        first = min((c["t"] for c in failed), default=None)
        after = [c for c in calls if c.get("ok") and first is not None and c["t"] > first]
        row.update(calls=len(calls), ok_calls=len(calls) - len(failed), failed_calls=len(failed),
                   breaks=int(first is not None), recovered_breaks=int(bool(after)),
                   lost=len(failed), requests=len(calls))
        if after:
            row["recover_p50_ms"] = row["recover_p95_ms"] = round((min(c["t"] for c in after) - first) * 1000.0, 1)
        return row
    lines = list(records(folder / "samples.jsonl", missing_ok=True))
    steps = [r for r in lines if "step" in r]
    breaks = [r["reconnect"] for r in lines if "reconnect" in r]
    calls = [s for s in steps if s["step"].startswith(("tools/", "resources/", "prompts/"))]
    times = [b["recover_ms"] for b in breaks if b.get("recover_ms") is not None]
    extra = sum(b.get("extra_requests", 0) for b in breaks)
    row.update(
        calls=len(calls), ok_calls=sum(1 for s in calls if not s.get("failure")),
        failed_calls=sum(1 for s in calls if s.get("failure")), breaks=len(breaks),
        recovered_breaks=sum(1 for b in breaks if b.get("ok")),
        recover_p50_ms=round(percentile(times, 50), 1) if times else None,
        recover_p95_ms=round(percentile(times, 95), 1) if times else None,
        requests=len([s for s in steps if s["step"] != "connect"]), extra_requests=extra,
        **{key: sum(b.get(key, 0) for b in breaks) for key in ("resent", "recovered", "lost", "duplicated", "uncertain", "budget_denied")},
    )
    row["extra_share"] = round(extra / row["requests"], 4) if row["requests"] else None
    return row


def csv_text(rows: Iterable[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c) for c in CSV_COLUMNS})
    return out.getvalue()


def render(rows: list[dict]) -> str:
    """Per cell: calls ok/failed, breaks recovered, time to recover, lost / duplicated / uncertain, extra requests."""
    lines = [f"{'transport':<16} {'fault':<8} {'policy':<13} {'calls':>6} {'failed':>6} {'breaks':>7} {'recov':>6} "
             f"{'p50 ms':>7} {'p95 ms':>7} {'lost':>5} {'dup':>4} {'uncert':>6} {'extra':>6}"]
    for r in rows:
        def num(key: str, spec: str = "") -> str:
            value = r.get(key)
            return "" if value is None else format(value, spec)

        lines.append(
            f"{r['transport']:<16} {r['fault']:<8} {r['policy']:<13} {num('calls'):>6} {num('failed_calls'):>6} "
            f"{num('breaks'):>7} {num('recovered_breaks'):>6} {num('recover_p50_ms', '.0f'):>7} {num('recover_p95_ms', '.0f'):>7} "
            f"{num('lost'):>5} {num('duplicated'):>4} {num('uncertain'):>6} {num('extra_requests'):>6}"
        )
    return "\n".join(lines)


# --- the run ------------------------------------------------------------------------------------


def _lab_faults(options: dict[str, str], window: tuple[float, float] | None) -> tuple[dict[str, str], Any]:
    """The fault addon's options and the restart plan of one fault."""
    from mcpbench.lab.topology.cluster import RestartPlan

    texts = {k: v for k, v in options.items() if k not in ("restart_at", "restart_every")}
    if window is not None and texts:
        texts |= {"faults_from": f"{window[0]:g}s", "faults_until": f"{window[1]:g}s"}
    restarts = None
    if "restart_at" in options or "restart_every" in options:
        restarts = RestartPlan(
            every=parse_duration(options["restart_every"], "restart_every") if "restart_every" in options else None,
            at=parse_duration(options["restart_at"], "restart_at") if "restart_at" in options else None,
        )
    return texts, restarts


def _policy(plan: ReconnectPlan, mode: str) -> ReconnectPolicy:
    base = plan.scenario.reconnect or ReconnectPolicy()
    return ReconnectPolicy.from_mapping({**base.to_json(), "policy": mode})


def run_plan(plan: ReconnectPlan, folder: Path, *, say: Callable[[str], None] = print) -> list[dict]:
    """Run every cell of `plan` into `folder/cells/<slug>/`; write reconnect.csv and the two charts."""
    from mcpbench.lab.topology.cluster import running_lab
    from mcpbench.files.outputs import write_atomic

    rows: list[dict] = []
    try:
        for cell in plan.cells:
            cell_dir = folder / "cells" / cell.slug
            cell_dir.mkdir(parents=True, exist_ok=True)
            options = plan.faults[cell.fault]
            if cell.transport == "stdio":
                _run_stdio(plan, cell, options, cell_dir, say)
            else:
                texts, restarts = _lab_faults(options, plan.window)
                with running_lab(1, cell.transport, policy="round-robin", folder=cell_dir,
                                 resumable=cell.transport == "streamable-http", faults=texts, restarts=restarts,
                                 fault_log=cell_dir / "faults.jsonl") as lab:
                    target = f"sse+{lab.url}" if cell.transport == "sse" else lab.url
                    _run_client(plan, cell, target, cell_dir, say)
                    if lab.restarter is not None and lab.restarter.error:
                        say(f"mcpbench: {cell.slug}: {lab.restarter.error}")
            row = cell_row(cell, cell_dir)
            rows.append(row)
            say(f"mcpbench: {cell.slug}: {row['ok_calls']}/{row['calls']} calls ok, "
                f"{row['recovered_breaks']}/{row['breaks']} breaks recovered, {row.get('lost') or 0} answers lost")
    finally:  # a stop signal ends the experiment; the cells that ran are kept
        write_atomic(folder / "reconnect.csv", csv_text(rows).encode())
        if rows:
            write_charts(folder)
    return rows


def _run_stdio(plan: ReconnectPlan, cell: ReconnectCell, options: dict[str, str], cell_dir: Path, say: Callable[[str], None]) -> None:
    import shlex

    server = [sys.executable, "-m", "mcpbench", "lab", "serve", "--transport", "stdio"]
    wrapper = [sys.executable, "-m", "mcpbench", "faults", "stdio", "--kill-after-messages", options["kill_after_messages"],
               "--fault-log", str(cell_dir / "faults.jsonl"), "--", *server]
    _run_client(plan, cell, "stdio:" + shlex.join(wrapper), cell_dir, say)


def _run_client(plan: ReconnectPlan, cell: ReconnectCell, target: str, cell_dir: Path, say: Callable[[str], None]) -> None:
    from mcpbench.load.runner import run_scenario

    scenario = plan.scenario
    if cell.policy != SDK:
        # Failed calls under faults are what the cell measures: exit_code_on_error 0.
        cell_scenario = scenario.with_overrides(target=target, reconnect=_policy(plan, cell.policy), name=cell.slug,
                                                exit_code_on_error=0, versions=(cell.version,) if cell.version else None)
        result = run_scenario(cell_scenario, cell_dir, check_target=False, echo=say)
        if result.summary.get("interrupted"):
            raise KeyboardInterrupt  # the load run stopped on a signal: so does the experiment
        return
    calls = [f"{c.target}={orjson.dumps(c.arguments or {}).decode()}" for c in scenario.mix if c.method == "tools/call"]
    argv = [sys.executable, "-m", "mcpbench.lab.peers.sdk_client", "--target", target, "--duration", f"{scenario.duration:g}",
            "--timeout", f"{scenario.timeout:g}", "--out", str(cell_dir / "sdk.jsonl")]
    if scenario.calls is not None:
        argv += ["--max-calls", str(scenario.calls)]
    for call in calls:
        argv += ["--call", call]
    with open(cell_dir / "sdk.log", "wb") as log:
        try:
            subprocess.run(argv, stdout=log, stderr=log, timeout=scenario.duration + SDK_GRACE, check=False)
        except subprocess.TimeoutExpired:
            say(f"mcpbench: {cell.slug}: the SDK client did not end in time")


def write_charts(folder: Path) -> None:
    """reconnect-timeline.png and recovery.png from a run's folder (the report draws the same)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mcpbench.analysis import charts
    from mcpbench.analysis.results import load_reconnect
    from mcpbench.files.outputs import atomic_path

    data = load_reconnect(folder)
    if data.calls.empty:
        return
    policies = list(dict.fromkeys(data.calls["policy"].astype(str)))
    fig, axes = plt.subplots(len(policies), 1, figsize=(11, 2.2 * len(policies) + 1.0), sharex=True, squeeze=False)
    for ax, policy in zip(axes[:, 0], policies, strict=True):
        charts.reconnect_timeline(data, policy, ax)
    fig.tight_layout()
    with atomic_path(folder / "reconnect-timeline.png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    charts.recovery_times(data, ax)
    fig.tight_layout()
    with atomic_path(folder / "recovery.png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
