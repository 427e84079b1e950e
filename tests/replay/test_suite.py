"""Suites of traces: `mcpbench replay DIR_OR_GLOB...` with JUnit XML and a Markdown summary, the same
outputs for `diff`, `inspect --strict` and `load`, and the bad input around them (one line, exit 2)."""

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest

from mcpbench.load.runner import RunResult, ThresholdVerdict
from mcpbench.load.scenario import parse_threshold
from mcpbench.replay.report import CallResult, Report, SessionResult
from mcpbench.replay.suite import SuiteResult, expand
from mcpbench.trace.shared import part_path
from tests.replay.helpers import cli
from tests.support.recordings import stdio_target
from tests.testing.helpers import VARIANT

CHANGED_PATH = "result.content[0].text"


@pytest.fixture
def suite_dir(tmp_path, recordings) -> Path:
    """A folder of traces: both eras' recordings, one of them in a subfolder."""
    folder = tmp_path / "traces"
    (folder / "more").mkdir(parents=True)
    shutil.copy(recordings["legacy"], folder / "legacy.jsonl")
    shutil.copy(recordings["auto"], folder / "more" / "auto.jsonl")
    (folder / "notes.txt").write_text("not a trace")
    return folder


def junit(path: Path) -> ElementTree.Element:
    return ElementTree.fromstring(path.read_bytes())


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_a_folder_replays_as_one_suite(suite_dir, tmp_path):
    xml, md, report = tmp_path / "out" / "r.xml", tmp_path / "out" / "r.md", tmp_path / "out" / "r.json"
    done = cli("replay", str(suite_dir), "--target", stdio_target(), "--junit-xml", str(xml), "--summary-md", str(md),
               "--report", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "mcpbench: 2 trace(s): 2 unchanged, 0 changed, 0 broken off" in done.stdout
    root = junit(xml)
    assert [root.get(k) for k in ("tests", "failures", "errors")] == ["2", "0", "0"]
    assert [s.get("name") for s in root.findall("testsuite")] == [str(suite_dir / "legacy.jsonl"), str(suite_dir / "more" / "auto.jsonl")]
    assert "(recorded " in root.find("testsuite/testcase/system-out").text  # latencies beside the recorded ones
    lines = md.read_text().splitlines()
    assert "| | name | calls | identical | changed | missing | extra | failed |" in lines
    assert sum(line.startswith("| ✅ | `") for line in lines) == 2
    assert json.loads(report.read_text())["kind"] == "replay-suite"


@pytest.mark.slow
def test_against_the_variant_each_changed_call_is_a_failure_naming_its_path(suite_dir, tmp_path):
    xml, md = tmp_path / "r.xml", tmp_path / "r.md"
    done = cli("replay", str(suite_dir / "**" / "*.jsonl"), "--target", VARIANT, "--junit-xml", str(xml),
               "--junit-per", "call", "--summary-md", str(md))
    assert done.returncode == 1, done.stdout + done.stderr
    root = junit(xml)
    cases = root.findall("testsuite/testcase")
    failures = [case for case in cases if case.find("failure") is not None]
    assert int(root.get("tests")) == len(cases) > 10
    assert int(root.get("failures")) == len(failures) >= 2
    assert all("tools/call echo" in case.get("name") for case in failures)
    assert all(f"changed: {CHANGED_PATH}:" in case.find("failure").get("message") for case in failures)
    text = md.read_text()
    assert text.splitlines()[2].startswith("❌ 2 of 2 failed")
    assert f"{CHANGED_PATH}: " in text and "(v2)" in text


@pytest.mark.slow
def test_one_trace_keeps_its_report_and_gets_the_outputs(recordings, tmp_path):
    xml = tmp_path / "r.xml"
    done = cli("replay", str(recordings["legacy"]), "--target", VARIANT, "--junit-xml", str(xml))
    assert done.returncode == 1
    assert done.stdout.startswith(f"mcpbench replay of {recordings['legacy']} →") and "trace(s):" not in done.stdout
    failure = junit(xml).find("testsuite/testcase/failure")
    assert failure.get("message").endswith("call(s) changed") and CHANGED_PATH in failure.text


def test_diff_and_inspect_write_the_same_outputs(recordings, tmp_path):
    xml, md = tmp_path / "d.xml", tmp_path / "d.md"
    done = cli("diff", str(recordings["legacy"]), str(recordings["legacy"]), "--junit-xml", str(xml), "--summary-md", str(md))
    assert done.returncode == 0, done.stderr
    assert junit(xml).get("failures") == "0" and "| ✅ |" in md.read_text()

    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(recordings["legacy"].read_bytes() + b'{"v":2,"ts":9.0,"session":"s9","transport":"stdio","dir":"s2c",'
                       b'"kind":"violation","code":"stdout-pollution","detail":"not JSON: hello"}\n')
    lines = len(broken.read_bytes().splitlines())
    done = cli("inspect", "--strict", str(broken), "--junit-xml", str(xml), "--summary-md", str(md))
    assert done.returncode == 1
    failure = [case for case in junit(xml).findall("testsuite/testcase") if case.find("failure") is not None]
    assert [case.get("name") for case in failure] == [f"session s9 line {lines}: stdout-pollution"]
    assert failure[0].find("failure").text == f"{broken}:{lines}: session s9: stdout-pollution: not JSON: hello"
    assert "| ❌ |" in md.read_text()


def test_load_thresholds_are_test_cases(tmp_path):
    verdicts = [ThresholdVerdict(parse_threshold("p95 < 200ms"), 12.5, True), ThresholdVerdict(parse_threshold("fail_ratio < 0.01"), 0.2, False)]
    result = RunResult(tmp_path, {"duration_s": 3.0, "total": {"count": 40, "failures": 8}}, verdicts)
    suite = result.suite("scenario.yaml", "the table")
    assert [(case.name, case.status) for case in suite.cases] == [("p95 < 200ms", "passed"), ("fail_ratio < 0.01", "failed")]
    assert suite.cases[1].message == "FAIL  fail_ratio < 0.01  (actual 0.2)"
    assert suite.stats == {"thresholds": 2, "failed": 1, "requests": 40, "failures": 8}


@pytest.mark.parametrize(("args", "message"), [
    (["nothing/*.jsonl"], "mcpbench: nothing/*.jsonl: matches no trace"),
    (["{empty}"], "a folder with no trace in it"),
    (["{suite}", "--out", "x.jsonl"], "mcpbench: --out is for one trace; 2 traces were named"),
    (["{suite}", "--junit-xml", "{suite}/legacy.jsonl"], "is also the trace"),
    (["{suite}", "--summary-md", "{file}/x.md"], "mcpbench: --summary-md"),
    (["{bad}"], "bad.jsonl:1: not JSON"),
])
def test_bad_input_is_one_line_and_exit_2(suite_dir, tmp_path, args, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.jsonl").write_text("{nope\n")
    (tmp_path / "file").write_text("")
    names = {"suite": suite_dir, "empty": tmp_path / "empty", "bad": tmp_path / "bad.jsonl", "file": tmp_path / "file"}
    done = cli("replay", *(arg.format(**names) for arg in args), "--target", stdio_target())
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_expand_reads_folders_globs_and_files_once_each(suite_dir):
    legacy = suite_dir / "legacy.jsonl"
    found = expand([str(suite_dir), str(legacy), str(suite_dir / "**" / "*.jsonl")])
    assert found == [legacy, suite_dir / "more" / "auto.jsonl"]


def test_expand_leaves_a_tees_pending_part_out_of_a_folder(tmp_path):
    trace = tmp_path / "s.jsonl"
    trace.write_text("")
    part_path(trace, "1234").write_text("")  # a tee's part, still being written: it joins s.jsonl, not the suite
    assert expand([str(tmp_path)]) == [trace]


def test_a_suites_verdict_is_its_results():
    # The status `replay DIR` exits with and writes into its JSON is SuiteResult's, not the command's.
    def report(status: str | None = None, aborted: str | None = None, abort_status: int = 3) -> Report:
        calls = [CallResult("s1", 1, "tools/call", "echo", status)] if status else []
        return Report("replay", "t.jsonl", "stdio:x", [SessionResult("s1", None, calls)], aborted=aborted, abort_status=abort_status)

    assert SuiteResult([report("identical"), report("identical")]).exit_code == 0
    changed = SuiteResult([report("identical"), report("changed")])
    assert changed.exit_code == 1 and changed.summary() == "2 trace(s): 1 unchanged, 1 changed, 0 broken off"
    broken = SuiteResult([report("changed"), report(aborted="gone"), report(aborted="stopped", abort_status=130)])
    assert broken.exit_code == 130 and broken.summary() == "3 trace(s): 0 unchanged, 1 changed, 2 broken off"
    assert broken.to_json()["kind"] == "replay-suite" and broken.to_json()["exit_code"] == 130
    assert len(broken.to_json()["traces"]) == 3
