"""`mcpbench probe` as a user runs it: the table, --json, --html, the report's section, the exit status."""

import json
import subprocess
import sys

import pytest

from mcpbench.lab.peers.quirks import Quirks
from tests.support.servers import REPO_ROOT, reference_server

pytestmark = pytest.mark.slow  # a process and a probe each

MCPBENCH = (sys.executable, "-m", "mcpbench")


def probe(*args: str, cwd=REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*MCPBENCH, "probe", *args], capture_output=True, text=True, timeout=180, cwd=cwd)


@pytest.fixture(scope="module")
def no_delete_server():
    """A server that refuses DELETE (405): churn warns, nothing fails."""
    with reference_server("streamable-http", quirks=Quirks(delete=False)) as server:
        yield server


def test_a_passing_probe_exits_0_and_writes_its_json_html_and_report_section(tmp_path, resumable_server):
    out, page = tmp_path / "probe.json", tmp_path / "probe.html"
    result = probe(resumable_server.url, "--only", "versions,unknown", "--skip", "unknown", "--json", str(out), "--html", str(page))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].split() == ["check", "verdict", "evidence", "fix"]
    assert [line.split()[:2] for line in result.stdout.splitlines()[2:] if line[:1].strip()] == [["versions", "pass"]]
    data = json.loads(out.read_text())
    assert data["probe"] == resumable_server.url and [c["check"] for c in data["checks"]] == ["versions"]
    assert data["checks"][0]["figures"]["bogus_version_status"] == 400 and data["progress_tool"] == "slow"
    assert "Probe: " + resumable_server.url in page.read_text()
    report = subprocess.run([*MCPBENCH, "report", str(out), "--out", str(tmp_path / "r.html")], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert f"probe {resumable_server.url}: 1 pass" in report.stdout


def test_a_failed_check_exits_1_and_names_the_fix(tmp_path, quirky_server):
    result = probe(quirky_server.url, "--only", "unknown", "--json", str(tmp_path / "p.json"))
    assert result.returncode == 1, result.stderr
    row = json.loads((tmp_path / "p.json").read_text())["checks"][0]
    assert row["verdict"] == "fail" and row["fix"].startswith("Answer 404") and "unknown      fail" in result.stdout


def test_a_warning_fails_only_with_strict(tmp_path, no_delete_server):
    args = (no_delete_server.url, "--only", "churn", "--spike", "5", "--json", str(tmp_path / "p.json"))
    lenient = probe(*args)
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    assert json.loads((tmp_path / "p.json").read_text())["checks"][0]["figures"]["spike"]["delete"] == {"405": 5}
    assert "churn        warn" in lenient.stdout
    assert probe(*args, "--strict").returncode == 1


def test_charts_come_with_the_checks_that_have_them(tmp_path, resumable_server):
    page = tmp_path / "p.html"
    result = probe(resumable_server.url, "--only", "sessions,buffering,churn", "--sessions", "5", "--spike", "5", "--html", str(page))
    assert result.returncode == 0, result.stdout + result.stderr
    text = page.read_text()
    assert text.count("<img") == 3 and "Buffering: arrival of the progress events" in text
