"""`mcpbench report`: one self-contained HTML page, checked as a browser renders it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcpbench.analysis.report import collect, headlines
from tests.support.browser import find_chromium, render_page
from tests.support.servers import REPO_ROOT

SCREENSHOT_DIR = REPO_ROOT / "results" / "test-artefacts"


def report_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcpbench", "report", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, captures, load_folder, lab_folder) -> Path:
    """A folder laid out like a main-job run: traces and a replay report, load/, lab/."""
    folder = tmp_path_factory.mktemp("run")
    for name in ("stdio-legacy.jsonl", "stdio-auto.jsonl", "http-legacy.jsonl", "sse.jsonl", "replay.json"):
        shutil.copy(captures / name, folder / name)
    shutil.copytree(load_folder, folder / "load")
    shutil.copytree(lab_folder, folder / "lab")
    return folder


@pytest.mark.timeout(300)  # the first test to need the captures makes them
def test_report_renders_in_chromium(run_folder):
    proc = report_command(str(run_folder))
    assert proc.returncode == 0, proc.stderr
    page = run_folder / "report.html"
    assert f"wrote {page}" in proc.stdout
    inputs = collect([run_folder])
    lines = headlines(inputs)
    assert [line.split(":")[0] for line in lines] == ["traces", "load", "replay", "lab"]
    assert lines == proc.stdout.splitlines()[:4]
    html = page.read_text()
    assert "http://" not in html.split("<body>")[0] and "<script" not in html and "<link" not in html
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    rendered = render_page(chromium, page)
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOT_DIR / "report.png"
    shot.write_bytes(rendered.screenshot)
    print(f"screenshot: {shot}")
    assert rendered.errors == []
    assert [url for url in rendered.requests if not url.startswith(("file:", "data:"))] == []  # no network fetch
    titles = [image["alt"] for image in rendered.images]
    assert {"latency over time", "latency CDF"} <= set(titles) and any(t.startswith("sticky sessions") for t in titles)
    assert any(t.startswith("replay of") for t in titles)
    for image in rendered.images:
        assert image["complete"] and image["width"] > 0 and image["height"] > 0 and image["scheme"] == "data", image
    text = " ".join(rendered.text.split())
    for line in lines:
        assert line in text
    calls = inputs.traces.calls
    assert f"{len(calls)} calls" in text and f"{inputs.loads[0].summary['total']['count']} calls" in text
    assert rendered.screenshot.startswith(b"\x89PNG") and len(rendered.screenshot) > 10_000


@pytest.mark.timeout(300)
def test_report_of_one_trace_and_bad_paths(captures, tmp_path):
    out = tmp_path / "one.html"
    proc = report_command(str(captures / "http-auto.jsonl"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().count("data:image/png;base64,") == 2
    proc = report_command(str(tmp_path / "missing.jsonl"))
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [f"mcpbench: {tmp_path / 'missing.jsonl'}: no such file or folder"]
    (tmp_path / "empty").mkdir()
    proc = report_command(str(tmp_path / "empty"))
    assert proc.returncode == 2 and "not a trace, load run, replay report, probe, comparison, lab run or run folder" in proc.stderr
    assert "Traceback" not in proc.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"v":1,"ts":1.0,"session":null,"transport":"stdio","dir":null,"kind":"trace"}\nnot json\n{"v":1}\n')
    proc = report_command(str(bad))
    assert proc.returncode == 2 and proc.stderr.startswith(f"mcpbench: {bad}:2: not JSON") and "Traceback" not in proc.stderr
