"""`mcpbench compare` over synthetic load run folders: verdicts, --fail-on, outputs, bad input."""

import subprocess
from pathlib import Path
from xml.etree import ElementTree

import orjson
import pytest
from click.testing import CliRunner

from mcpbench.cli import main
from mcpbench.compare.judge import MIN_STEP_SAMPLES
from mcpbench.compare.runs import read_sides
from mcpbench.load import histograms
from tests.compare.helpers import compare_cmd, run_folder
from tests.support.servers import REPO_ROOT


def compare(*args) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["compare", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Base and a rerun of the same build (another seed); new with `add` 20 % slower and 3 % errors, and a rerun of it."""
    root = tmp_path_factory.mktemp("runs")
    return {
        "base": run_folder(root / "base", seed=1),
        "again": run_folder(root / "again", seed=2),
        "slower": run_folder(root / "slower", seed=3, slower={"tools/call add": 1.2}, fail_ratio=0.03),
        "slower-again": run_folder(root / "slower-again", seed=5, slower={"tools/call add": 1.2}, fail_ratio=0.03),
    }


def test_the_same_build_is_within_noise_and_a_slower_step_is_slower_alone(runs, tmp_path):
    status, out, _ = compare(runs["base"], runs["again"], "--out", tmp_path / "same", "--fail-on", "p95>+10%", "--fail-on", "errors>+1pp")
    assert status == 0, out
    data = orjson.loads((tmp_path / "same" / "compare.json").read_bytes())
    assert {s["step"]: s["verdict"] for s in data["steps"]} == {"tools/call add": "within noise", "tools/call echo": "within noise"}
    # the synthetic runs start at the same time: side by side, judged stretch by stretch of the time both ran
    assert {s["method"] for s in data["steps"]} == {"one run a side, side by side: paired t over stretches of the time both ran (4.0 s)"}
    assert "note: one run a side, side by side: compared stretch by stretch" in out

    status, out, _ = compare(runs["base"], runs["slower"], "--out", tmp_path / "slower", "--fail-on", "p95>+10%",
                             "--fail-on", "errors>+1pp", "--junit-xml", tmp_path / "j.xml", "--summary-md", tmp_path / "s.md")
    assert status == 1, out
    data = orjson.loads((tmp_path / "slower" / "compare.json").read_bytes())
    steps = {s["step"]: s for s in data["steps"]}
    assert steps["tools/call add"]["verdict"] == "slower" and steps["tools/call echo"]["verdict"] == "within noise"
    add = steps["tools/call add"]["quantiles"]["p50"]
    assert 0.1 < add["rel"]["low"] < 0.2 < add["rel"]["high"] < 0.3  # 20 % slower, inside its interval
    assert add["base"]["low"] <= add["base"]["value"] <= add["base"]["high"]
    # both rules broken on add, beyond noise; errors rose on echo as well (the new run's failures are everywhere).
    # One run a side: the errors rule fails (tested over calls), the p95 rule is inconclusive (no spread between runs)
    assert any("past errors>+1pp" in f for f in steps["tools/call add"]["failed"])
    assert not any("past p95>+10%" in f for f in steps["tools/call add"]["failed"])
    assert any("past p95>+10%" in f and "one run a side cannot tell a build from a process" in f for f in steps["tools/call add"]["inconclusive"])
    assert steps["tools/call echo"]["errors"]["verdict"] == "more errors"
    assert "INCONCLUSIVE  tools/call add: p95" in out and "FAIL  tools/call add: errors" in out
    assert (tmp_path / "slower" / "compare.png").stat().st_size > 10_000
    suite = ElementTree.parse(tmp_path / "j.xml").getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {"tools/call add", "tools/call echo"}
    assert cases["tools/call add"].find("failure") is not None
    summary = (tmp_path / "s.md").read_text()
    assert "| ❌ | `tools/call add` | slower |" in summary


def test_runs_one_after_the_other_are_judged_over_stretches_of_each_and_said_so(runs, tmp_path):
    later = run_folder(tmp_path / "later", seed=2, start=1_796_000_600.0)  # ten minutes after the base run
    status, out, _ = compare(runs["base"], later, "--out", tmp_path / "o", "--json")
    assert status == 0, out
    data = orjson.loads(out[: out.rindex("}") + 1])
    assert {s["verdict"] for s in data["steps"]} == {"within noise"}
    assert {s["method"] for s in data["steps"]} == {"one run a side: t over stretches of each run"}
    assert any(note.startswith("one run a side, not at the same time") for note in data["notes"])
    # every quantile judged over stretches with the samples it needs: p99 (500 a stretch) over at least 3
    assert all(q["verdict"] != "too few samples" for s in data["steps"] for q in s["quantiles"].values())


def test_a_quantile_rule_fails_over_repeated_runs_and_is_inconclusive_with_one_run_a_side(runs, tmp_path):
    proc = subprocess.run(compare_cmd(runs["base"], runs["slower"], "--out", tmp_path / "one", "--fail-on", "p95>+10%"),
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "mcpbench: one run a side: a --fail-on rule broken by these two runs on tools/call add is inconclusive (one run a side "
        "cannot tell a build from a process): no verdict; repeat the runs (--base A1 A2 A3 --new B1 B2 B3)"]
    assert "slower" in proc.stdout  # the verdict on these two runs is still given
    repeated = ("--base", runs["base"], "--base", runs["again"], "--new", runs["slower"], "--new", runs["slower-again"])
    status, out, _ = compare(*repeated, "--out", tmp_path / "repeated", "--fail-on", "p95>+10%")
    assert status == 1 and "FAIL  tools/call add: p95" in out and "INCONCLUSIVE" not in out, out


def test_a_rule_needs_the_change_past_it_and_beyond_noise(runs, tmp_path):
    # add is 20 % slower: past +10 % but not past +50 %
    status, out, _ = compare(runs["base"], runs["slower"], "--out", tmp_path / "a", "--fail-on", "p50>+50%")
    assert status == 0, out
    # the same build: whatever the point change, not beyond noise at 99.9 %
    status, out, _ = compare(runs["base"], runs["again"], "--out", tmp_path / "b", "--fail-on", "p99>+0%", "--confidence", "0.999")
    assert status == 0, out


def test_json_on_stdout_and_repeated_runs_as_globs(runs, tmp_path):
    root = runs["base"].parent
    status, out, err = compare("--base", root / "ba*", "--base", root / "again", "--new", root / "slower*", "--json", "--out", tmp_path / "o")
    assert status == 0, err
    data = orjson.loads(out)
    assert data["kind"] == "compare" and data["base"]["folders"] == [str(root / "base"), str(root / "again")]
    assert len(data["new"]["folders"]) == 2
    steps = {s["step"]: s for s in data["steps"]}
    assert steps["tools/call add"]["verdict"] == "slower" and steps["tools/call echo"]["verdict"] == "within noise"
    # two runs a side: the intervals come from the spread between runs, and no note says they cannot
    assert steps["tools/call add"]["method"].startswith("between runs") and "(2 + 2 runs)" in steps["tools/call add"]["method"]
    assert not any(note.startswith("one run a side") for note in data["notes"])
    assert data["steps"][0]["base"]["count"] == sum(s["base"]["count"] for s in data["steps"][:1])


def test_histograms_and_samples_give_the_same_counts(runs, tmp_path):
    (kept,) = read_sides([[str(runs["base"])]])
    plain = run_folder(tmp_path / "plain", seed=1, histograms=False)
    assert not (plain / histograms.FILE).exists()
    (parsed,) = read_sides([[str(plain)]])
    assert kept.steps.keys() == parsed.steps.keys()
    for key in kept.steps:
        assert (kept.merged(key) == parsed.merged(key)).all()
        assert kept.count(key) == parsed.count(key)


def test_different_scenarios_compare_the_steps_in_common_and_name_the_rest(runs, tmp_path):
    other = run_folder(tmp_path / "other", seed=4, scenario="other", mix={"tools/call echo": (0.5, 3.0, 0.4), "tools/list": (0.5, 2.0, 0.4)})
    status, out, _ = compare(runs["base"], other, "--out", tmp_path / "o")
    assert status == 0, out
    assert "only in base (not compared): tools/call add" in out and "only in new (not compared): tools/list" in out
    assert "different scenarios: synthetic (base) and other (new)" in out
    data = orjson.loads((tmp_path / "o" / "compare.json").read_bytes())
    assert [s["step"] for s in data["steps"]] == ["tools/call echo"]


def test_too_few_samples_is_said_and_exits_2_without_a_verdict(tmp_path):
    few = MIN_STEP_SAMPLES - 10
    a, b = run_folder(tmp_path / "a", seed=1, samples=few), run_folder(tmp_path / "b", seed=2, samples=few, slower={"tools/call add": 3.0})
    proc = subprocess.run(compare_cmd(a, b, "--out", tmp_path / "o", "--fail-on", "p95>+1%"), cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "mcpbench: too few samples to judge any step in common (see above): no verdict"
    assert "too few samples to judge" in proc.stdout and "slower" not in proc.stdout


@pytest.mark.parametrize("make, says", [
    (lambda d: d.mkdir(), "not a load run (no samples.jsonl)"),
    (lambda d: None, "no such folder"),
])
def test_a_folder_that_is_not_a_load_run_is_one_line_exit_2(runs, tmp_path, make, says):
    folder = tmp_path / "nothing"
    make(folder)
    status, out, err = compare(runs["base"], folder)
    assert status == 2 and err.strip() == f"mcpbench: {folder}: {says}"


def test_a_rule_that_does_not_parse_is_exit_2_naming_it(runs):
    status, _, err = compare(runs["base"], runs["again"], "--fail-on", "p95 > ten")
    assert status == 2 and err.startswith("mcpbench: --fail-on 'p95 > ten': expected")
    assert len(err.strip().splitlines()) == 1


def test_no_step_in_common_is_exit_2(runs, tmp_path):
    other = run_folder(tmp_path / "other", seed=5, mix={"tools/list": (1.0, 2.0, 0.4)})
    status, _, err = compare(runs["base"], other, "--out", tmp_path / "o")
    assert status == 2 and "no step in common" in err


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_the_report_shows_a_comparison_beside_a_load_run(runs, tmp_path):
    from mcpbench.analysis.report import write_report

    status, out, _ = compare(runs["base"], runs["slower"], "--out", tmp_path / "cmp")
    assert status == 0, out
    path, lines = write_report([tmp_path / "cmp", runs["base"]], tmp_path / "report.html")
    page = path.read_text()
    assert "compare: base vs slower: 1 slower, 1 within noise" in lines
    assert "Comparison of load runs" in page and "<td>slower</td>" in page and page.count("<img") >= 4


def test_trim_leaves_out_a_warm_up(tmp_path):
    base = run_folder(tmp_path / "base", seed=1, rate=500)  # 3,000 samples over 6 s
    warm = run_folder(tmp_path / "warm", seed=2, rate=500, slow_start=1.0)  # its first second twice as slow

    def p95_changes(*args) -> dict[str, float]:
        status, out, _ = compare(base, warm, "--out", tmp_path / "o", *args)
        assert status == 0, out
        data = orjson.loads((tmp_path / "o" / "compare.json").read_bytes())
        return {s["step"]: s["quantiles"]["p95"]["rel"]["value"] for s in data["steps"]}, data

    whole, _ = p95_changes()
    trimmed, data = p95_changes("--trim", "1.2s")
    # the first of 6 s twice as slow: a sixth of the stretches the p95 is judged over
    assert all(change > 0.1 for change in whole.values()), whole
    assert all(abs(change) < 0.08 for change in trimmed.values()), trimmed
    assert data["trim_s"] == 1.2 and data["steps"][0]["base"]["count"] < 3000 * 0.8
    assert "the first and last 1.2 s of every run left out (--trim)" in data["notes"]
    status, _, err = compare(base, warm, "--trim", "soon")
    assert status == 2 and "--trim 'soon' is not a duration" in err
