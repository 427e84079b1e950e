"""Real pairs of load runs against the reference server, each pair compared (`mcpbench bench compare`).

Issue 37's counts: pairs of runs of the same build must give no failing verdict, and pairs against a
server with one tool slowed by 20 % (`lab serve --slow slow=20%`) must be judged slower on that
step, and not on the other. A pair is one base run and one new run, each against a server of its own
started for the pair (two processes of the same build, or one of them slowed), the two loads side by
side (which one starts first alternating from pair to pair), the slowed pairs spread among the others.
Side by side, the runs see the same machine at the same time, and `compare` judges them stretch by
stretch of the time both ran: on this shared machine the load of other jobs swings within seconds
(a 3 ms call queues for 2 to 60 ms), so runs one after the other differ by what the machine did
between them, not by the build.
Each pair is compared as a CI job would: `mcpbench compare BASE
NEW --trim --fail-on ...` in a process of its own. The load average is noted before and after each
pair: the machine is shared.
"""

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from mcpbench.lab.peers.servers import reference_server
from mcpbench.protocol.errors import EXIT_ENVIRONMENT

# The slowed tool sleeps SLEEP_S; 20 % of that (its run time) is what the lab adds to each of its calls.
# 300 ms, so that the tool's run time, not the call's fixed cost, is most of its step's latency: 20 %
# of the tool is then most of 20 % of the step. The fixed cost is a few ms on a quiet machine, but at
# a load of 15 to 22 the CPU queue and each server's garbage collections (100 to 300 ms, docs/capacity.md)
# add 20 to 50 ms to a call: with 100 ms the slowdown (20 ms) was found in 2 of 5 pairs at load 9 to 22.
SLEEP_S = 0.3
SLOWDOWN = "slow=20%"
SCENARIO = """\
name: compare-pairs
session: long_lived
era: handshake
mix:
  - call: tools/call
    tool: echo
    arguments: {{text: "hello"}}
    weight: 1
  - call: tools/call
    tool: slow
    arguments: {{seconds: {sleep}, steps: 1}}
    weight: 1
think_time: [0.0, 0.005]
users: 6
spawn_rate: 6
duration: {duration}
timeout: 10s
exit_code_on_error: 0  # a failed call is part of the measurement (compare tests the error ratios), not a failed run
"""
DURATION_S, QUICK_DURATION_S = 20, 6
# The first second of a run holds its sessions' start (all users at once): slower than the rest. Left out at both ends.
TRIM = "1s"
# The issue's own examples: what a CI job would fail on.
RULES = ("p95>+10%", "errors>+1pp")
# The pairs' runs are compared again this many a side, as repeated runs are (the spread between runs).
GROUP = 5
# A load of a few seconds, with Locust's start and stop, ends well within this.
RUN_TIMEOUT = 120
SLOWED_STEP, OTHER_STEP = "tools/call slow", "tools/call echo"


class PairLost(RuntimeError):
    """A load of a pair could not reach its server (exit 3): the environment, not a measurement."""


def run_pairs(folder: Path, same: int, slowed: int, duration: int = DURATION_S) -> dict[str, Any]:
    """`same` pairs of the same build, then `slowed` pairs against the slowed server; their verdicts and loads."""
    scenario = folder / "scenario.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    scenario.write_text(SCENARIO.format(duration=f"{duration}s", sleep=SLEEP_S))
    rows = []
    # The slowed pairs spread among the others: each kind sees the machine's busy and quiet minutes.
    kinds = ["same"] * (same + slowed)
    for index in range(slowed):
        kinds[int((index + 1) * (same + slowed) / slowed) - 1] = "slowed"
    for number, kind in enumerate(kinds):
        new_args = ["--slow", SLOWDOWN] if kind == "slowed" else []
        try:
            rows.append(_pair(folder / f"{kind}-{number:02d}", scenario, new_args, kind, base_first=number % 2 == 0))
        except PairLost as exc:  # a server of the pair was gone (seen once at load 12): the pair again, with new servers, once
            print(f"mcpbench: pair {number + 1} again: {exc}", file=sys.stderr, flush=True)
            rows.append(_pair(folder / f"{kind}-{number:02d}-again", scenario, new_args, kind, base_first=number % 2 == 0) | {"again": str(exc)})
        print(f"mcpbench: pair {number + 1}/{same + slowed} ({kind}): {_line(rows[-1])}", file=sys.stderr, flush=True)
    groups = [_group(folder / f"group-{kind}-{start:02d}", [r for r in rows if r["kind"] == kind][start:start + GROUP], kind)
              for kind in ("same", "slowed") for start in range(0, kinds.count(kind) - GROUP + 1, GROUP)]
    return {"design": __doc__.split("\n\n")[0], "groups": groups, "scenario": SCENARIO.format(duration=f"{duration}s", sleep=SLEEP_S), "trim": TRIM,
            "fail_on": list(RULES), "slowdown": SLOWDOWN, "slowdown_expected_ms": round(0.2 * SLEEP_S * 1000, 2),
            "pairs": rows, "counts": _counts(rows), "group_counts": _group_counts(groups)}


def _pair(folder: Path, scenario: Path, new_args: list[str], kind: str, base_first: bool) -> dict[str, Any]:
    before = os.getloadavg()
    started = time.monotonic()
    with reference_server("streamable-http") as base, reference_server("streamable-http", extra_args=new_args) as new:
        order = [("base", base.url), ("new", new.url)]
        _loads(folder, scenario, order if base_first else order[::-1])
    proc = _compare([str(folder / "base"), str(folder / "new")], folder / "compare")
    data = orjson.loads(proc.stdout) if proc.stdout.startswith(b"{") else {"steps": [], "notes": [proc.stderr.decode(errors="replace")]}
    return {
        "kind": kind, "folder": str(folder), "base_first": base_first, "exit_code": proc.returncode,
        "load_before": [round(x, 2) for x in before], "load_after": [round(x, 2) for x in os.getloadavg()],
        "seconds": round(time.monotonic() - started, 1),
        "steps": {s["step"]: _step(s) for s in data["steps"]}, "notes": data.get("notes", []),
    }


def _group(folder: Path, rows: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The pairs' runs compared as repeated runs: their base runs against their new runs (t between runs)."""
    sides = [a for row in rows for a in ("--base", str(Path(row["folder"]) / "base"))]
    sides += [a for row in rows for a in ("--new", str(Path(row["folder"]) / "new"))]
    proc = _compare(sides, folder)
    data = orjson.loads(proc.stdout) if proc.stdout.startswith(b"{") else {"steps": []}
    return {"kind": kind, "runs_a_side": len(rows), "exit_code": proc.returncode,
            "steps": {s["step"]: _step(s) for s in data["steps"] if s["step"] in (SLOWED_STEP, OTHER_STEP)}}


def _compare(sides: list[str], out: Path) -> subprocess.CompletedProcess:
    """`mcpbench compare` as a CI job runs it, with the JSON on stdout."""
    return subprocess.run([sys.executable, "-m", "mcpbench", "compare", *sides, "--trim", TRIM,
                           *(a for rule in RULES for a in ("--fail-on", rule)), "--out", str(out), "--json"],
                          capture_output=True, timeout=RUN_TIMEOUT)


def _step(step: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"verdict": step["verdict"], "method": step.get("method"), "failed": step["failed"],
                           "inconclusive": step.get("inconclusive", []),
                           "ok": [step["base"]["ok"], step["new"]["ok"]]}
    for name, q in step["quantiles"].items():
        out[name] = {"base": q["base"]["value"], "new": q["new"]["value"], "diff_ms": q["diff_ms"]["value"],
                     "rel": [q["rel"]["value"], q["rel"]["low"], q["rel"]["high"]], "verdict": q["verdict"]}
    return out


def _loads(folder: Path, scenario: Path, order: list[tuple[str, str]]) -> None:
    """`mcpbench load` against each url at once, started in `order`; each writes `folder`/<side>."""
    procs = {}
    try:
        for side, url in order:
            procs[side] = subprocess.Popen([sys.executable, "-m", "mcpbench", "load", str(scenario), "--target", url, "--out", str(folder / side)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for side, proc in procs.items():
            _, err = proc.communicate(timeout=RUN_TIMEOUT)
            if proc.returncode != 0:
                error = PairLost if proc.returncode == EXIT_ENVIRONMENT else RuntimeError
                raise error(f"load of {side} exited {proc.returncode}: {err.decode(errors='replace').strip()[-500:]}")
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _line(row: dict[str, Any]) -> str:
    parts = []
    for name, step in row["steps"].items():
        p50 = step.get("p50")
        change = f" p50 {p50['rel'][0]:+.1%} [{p50['rel'][1]:+.1%}, {p50['rel'][2]:+.1%}]" if p50 and p50["rel"][0] is not None else ""
        marks = (" FAILED" if step["failed"] else "") + (" INCONCLUSIVE" if step.get("inconclusive") else "")
        parts.append(f"{name.split()[-1]} {step['verdict']}{change}{marks}")
    return f"{'; '.join(parts)} (exit {row['exit_code']}, load {row['load_before'][0]:.1f}->{row['load_after'][0]:.1f})"


def _group_counts(groups: list[dict[str, Any]]) -> dict[str, Any]:
    def verdicts(kind: str, step: str) -> list[str]:
        return [g["steps"].get(step, {}).get("verdict", "missing") for g in groups if g["kind"] == kind]

    return {f"{kind} {step}": verdicts(kind, step) for kind in ("same", "slowed") for step in (SLOWED_STEP, OTHER_STEP)}


def _counts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    same = [r for r in rows if r["kind"] == "same"]
    slowed = [r for r in rows if r["kind"] == "slowed"]

    def verdict(r: dict[str, Any], step: str) -> str:
        return r["steps"].get(step, {}).get("verdict", "missing")

    return {
        "same_pairs": len(same),
        "same_failing": sum(1 for r in same if r["exit_code"] == 1),
        "same_any_slower_or_faster": sum(1 for r in same if any(s["verdict"] in ("slower", "faster") for s in r["steps"].values())),
        # exit 2: too few samples, or a rule broken by one run a side (inconclusive: no verdict on the build)
        "same_unjudged": sum(1 for r in same if r["exit_code"] == 2),
        "same_inconclusive": sum(1 for r in same if any(s.get("inconclusive") for s in r["steps"].values())),
        "slowed_pairs": len(slowed),
        "slowed_step_slower": sum(1 for r in slowed if verdict(r, SLOWED_STEP) == "slower"),
        "other_step_slower": sum(1 for r in slowed if verdict(r, OTHER_STEP) == "slower"),
        "slowed_unjudged": sum(1 for r in slowed if r["exit_code"] == 2),
        "slowed_inconclusive": sum(1 for r in slowed if any(s.get("inconclusive") for s in r["steps"].values())),
    }


def chart(data: dict[str, Any], speed: dict[str, Any], path: Path) -> Path:
    """Left: each pair's p50 change per step with its interval (grey: same build, red: slowed), the load
    average beside it. Right: the million-sample compare's time against its target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mcpbench.files.outputs import atomic_path

    rows = data["pairs"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, max(4.0, 0.28 * len(rows) + 1.5)), gridspec_kw={"width_ratios": [3, 1]})
    for offset, step, marker in ((-0.15, SLOWED_STEP, "o"), (0.15, OTHER_STEP, "s")):
        for number, row in enumerate(rows):
            p50 = row["steps"].get(step, {}).get("p50")
            if not p50 or None in p50["rel"]:
                left.text(0, number + offset, "too few", fontsize=6, va="center", color="#8c8c8c")
                continue
            value, low, high = (100 * v for v in p50["rel"])
            colour = "#c44e52" if row["kind"] == "slowed" else "#4c72b0"
            left.errorbar(value, number + offset, xerr=[[value - low], [high - value]], fmt=marker, color=colour, ms=4, capsize=2,
                          alpha=1.0 if step == SLOWED_STEP else 0.5)
    left.axvline(0, color="black", linewidth=0.8)
    left.set_yticks(range(len(rows)), [f"{r['kind']} {n + 1} (load {r['load_before'][0]:.0f})" for n, r in enumerate(rows)], fontsize=7)
    left.invert_yaxis()
    left.set_xlabel("p50 change, new vs base (%), 95 % interval: ● tools/call slow, ■ tools/call echo")
    counts = data["counts"]
    left.set_title(f"{counts['same_pairs']} same-build pairs: {counts['same_failing']} failing --fail-on; "
                   f"{counts['slowed_pairs']} pairs with slow=20%: slow step slower in {counts['slowed_step_slower']}, "
                   f"echo slower in {counts['other_step_slower']}", fontsize=9)
    right.bar(["1M-sample compare", "target"], [speed["command_s"], speed["target_s"]], color=["#4c72b0", "#8c8c8c"])
    right.set_ylabel("seconds")
    right.set_title(f"two 1,000,000-sample runs (load {speed['load'][0]:.1f})", fontsize=9)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return path
