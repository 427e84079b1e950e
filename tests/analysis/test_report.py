"""`mcpbench report`: one self-contained HTML page, checked as a browser renders it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcpbench.analysis.report import collect, findings, headlines
from mcpbench.protocol.errors import McpbenchError
from tests.support.browser import find_chromium, render_page, render_page_at
from tests.support.servers import REPO_ROOT
from tests.support import traces

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
    bad.write_bytes(traces.lines(traces.header()) + b'not json\n{"v":1}\n')
    proc = report_command(str(bad))
    assert proc.returncode == 2 and proc.stderr.startswith(f"mcpbench: {bad}:2: not JSON") and "Traceback" not in proc.stderr


def test_lab_cells_built_to_break_are_listed_apart_from_cells_that_broke(tmp_path):
    rows = [("stateful-sse", "round-robin", 3, 4, "break"), ("stateful-json", "sticky", 3, 2, "hold"),
            ("legacy-sse", "random", 3, 0, "break"), ("stateless", "round-robin", 3, 0, "hold")]
    (tmp_path / "sticky.csv").write_text(
        "transport,mode,policy,balancer,instances,sessions,calls,failed_calls,failed_sessions,first_instance_share,expected\n"
        + "".join(f"streamable-http,{mode},{policy},builtin,{n},10,40,{failed},{failed},0.4,{expected}\n" for mode, policy, n, failed, expected in rows))
    found = [(f.severity, f.text.split(":")[0]) for f in findings(collect([tmp_path]))]
    assert found == [("bad", "sticky cell streamable-http / stateful-json / sticky / builtin / 3 instances"),
                     ("warn", "sticky cell streamable-http / legacy-sse / random / builtin / 3 instances"),
                     ("shown", "sticky cell streamable-http / stateful-sse / round-robin / builtin / 3 instances")]
    (tmp_path / "demonstrations.json").write_text("[1]")
    with pytest.raises(McpbenchError, match="demonstrations.json: not a JSON object of file names and reasons"):
        collect([tmp_path])


# Run in the laid-out page: what a reader would see go wrong, as data.
LAYOUT_CHECKS = """(() => {
  const root = document.documentElement;
  const out = {pageWidth: root.scrollWidth, viewWidth: root.clientWidth, overflowing: [], brokenHeaders: [], rawHeaders: [],
               extraHeaderRows: 0, unscrolledTables: 0, leftNumbers: [], longNumbers: [], sections: [], deadLinks: [],
               charts: [], timelines: [], findings: [], shown: []};
  for (const th of document.querySelectorAll('table.data th')) {
    // each word of the header, measured unbroken in the header's own font, must fit the header's box
    const style = getComputedStyle(th);
    const room = th.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const text = th.innerText;
    const probe = document.createElement('span');
    probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap';
    th.appendChild(probe);
    for (const word of text.split(/\\s+/)) {
      probe.textContent = word;
      if (probe.getBoundingClientRect().width > room + 0.5) out.brokenHeaders.push(text + ' | ' + word);
    }
    probe.remove();
    if (/_/.test(text)) out.rawHeaders.push(text);
  }
  const texts = 'td, th, h1, h2, h3, h4, p, li, figcaption, .legend span, .tlrow .lab, .tlrow .took';
  for (const el of document.querySelectorAll(texts)) {
    if (el.scrollWidth > el.clientWidth + 1) out.overflowing.push(el.tagName + ' ' + el.className + ': ' + el.innerText.slice(0, 60));
  }
  for (const table of document.querySelectorAll('table.data')) {
    out.extraHeaderRows += table.tHead.rows.length - 1;
    const box = table.parentElement;
    if (!box.classList.contains('scroll') || getComputedStyle(box).overflowX !== 'auto') out.unscrolledTables += 1;
  }
  for (const td of document.querySelectorAll('td.num')) {
    if (getComputedStyle(td).textAlign !== 'right') out.leftNumbers.push(td.innerText);
    if (/\\.\\d{4,}/.test(td.innerText)) out.longNumbers.push(td.innerText);
  }
  for (const section of document.querySelectorAll('section')) {
    const lead = section.querySelector(':scope > p.lead');
    out.sections.push({id: section.id, title: section.querySelector('h2').innerText, lead: lead ? lead.innerText : ''});
  }
  for (const a of document.querySelectorAll('a[href^="#"]')) {
    if (!document.getElementById(a.getAttribute('href').slice(1))) out.deadLinks.push(a.getAttribute('href'));
  }
  for (const figure of document.querySelectorAll('figure.chart')) {
    const img = figure.querySelector('img');
    out.charts.push({title: img.alt, series: Number(figure.dataset.series), legend: figure.dataset.legend, width: img.naturalWidth});
  }
  for (const figure of document.querySelectorAll('figure.timeline')) {
    out.timelines.push({id: figure.id, bars: figure.querySelectorAll('.bar').length, rows: figure.querySelectorAll('.tlrow').length,
                        legend: figure.querySelectorAll('.legend span').length, caption: figure.querySelector('figcaption').innerText,
                        rounds: figure.querySelectorAll('.bar.round').length, lost: figure.querySelectorAll('.bar.lost').length,
                        progress: figure.querySelectorAll('.mark.prog').length});
  }
  for (const li of document.querySelectorAll('#attention li')) {
    out.findings.push({text: li.innerText, href: li.querySelector('a').getAttribute('href')});
  }
  for (const li of document.querySelectorAll('#shown li')) {
    out.shown.push({text: li.innerText, href: li.querySelector('a').getAttribute('href')});
  }
  return out;
})()"""

WIDTHS = (1280, 400)
TRACE_DATA = REPO_ROOT / "tests" / "trace" / "data"


def assert_reads_well(found: dict, width: int) -> None:
    """What LAYOUT_CHECKS found wrong with the page at `width` px: nothing."""
    assert found["pageWidth"] <= found["viewWidth"], f"{width} px: the page is wider than the screen"
    assert found["overflowing"] == [] and found["brokenHeaders"] == [], width
    assert found["rawHeaders"] == [] and found["extraHeaderRows"] == 0 and found["unscrolledTables"] == 0
    assert found["leftNumbers"] == [] and found["longNumbers"] == []
    assert found["deadLinks"] == []


@pytest.fixture(scope="module")
def cut_run_folder(tmp_path_factory, run_folder) -> Path:
    """The run folder plus a trace whose recorder stopped before the last answer came: a failed session."""
    folder = tmp_path_factory.mktemp("cut-run")
    shutil.copytree(run_folder, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns("report.html"))
    lines = (run_folder / "stdio-legacy.jsonl").read_text().splitlines(keepends=True)
    last_answer = max(i for i, line in enumerate(lines) if '"dir":"s2c"' in line and '"result"' in line)
    (folder / "stdio-cut.jsonl").write_text("".join(lines[:last_answer]))
    return folder


@pytest.mark.timeout(300)
def test_report_reads_well_at_desktop_and_phone_width(cut_run_folder):
    proc = report_command(str(cut_run_folder))
    assert proc.returncode == 0, proc.stderr
    page = cut_run_folder / "report.html"
    assert page.stat().st_size < 2_000_000  # self-contained, and still a file to mail
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    inputs = collect([cut_run_folder])
    sessions = inputs.traces.sessions
    cut = sessions.index[(sessions["trace"] == "stdio-cut.jsonl").to_numpy()][0]
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        rendered = render_page_at(chromium, page, width, LAYOUT_CHECKS)
        (SCREENSHOT_DIR / f"report-{width}.png").write_bytes(rendered.screenshot)
        found = rendered.checks
        assert rendered.errors == []
        assert_reads_well(found, width)
        ids = [s["id"] for s in found["sections"]]
        assert ids == ["summary", "trace-latency", "trace-charts", "trace-outcomes", "violations", "sessions", "timelines",
                       "load-latency", "load-failures", "load-charts", "replays", "lab-sticky-0"]
        assert all(len(s["lead"]) > 40 for s in found["sections"]), found["sections"]
        assert found["charts"] and all(c["series"] > 0 and c["legend"] == "yes" and c["width"] > 0 for c in found["charts"]), found["charts"]
        drawn = found["timelines"]
        assert len(drawn) == min(12, int((sessions["calls"] > 0).sum()))
        assert all(t["bars"] > 0 and t["legend"] > 0 for t in drawn)
        assert sum(t["rounds"] for t in drawn) == int((inputs.traces.calls["outcome"] == "input-required").sum())
        assert sum(t["progress"] for t in drawn) > 0  # the `slow` tool's progress, on its bar
        # the worst first: the cut session (a call without an answer), linked to its timeline, then the broken sticky cells
        first = found["findings"][0]
        assert "stdio-cut.jsonl" in first["text"] and "1 call without an answer" in first["text"] and first["href"] == f"#timeline-{cut}"
        assert drawn[0]["id"] == f"timeline-{cut}" and drawn[0]["lost"] == 1
        # a broken cell built to break (a stateful mode spread over instances) is listed apart, as failing on purpose
        cells = inputs.labs[0].sticky
        broken = cells[cells["failed_sessions"] > 0]
        sticky = [f for f in found["findings"] if "sticky cell" in f["text"]]
        shown = [f for f in found["shown"] if "sticky cell" in f["text"]]
        assert len(shown) == int((broken["expected"] == "break").sum()) > 0 and all("as designed" in f["text"] for f in shown)
        assert len([f for f in sticky if "sessions failed" in f["text"]]) == int((broken["expected"] == "hold").sum())
        assert all(f["href"] == "#lab-sticky-0" for f in sticky + shown)


@pytest.mark.slow  # a browser's start and a page's layout: several seconds on a busy machine
def test_violations_and_failed_sessions_come_first_and_errors_show_on_the_timeline(tmp_path):
    out = tmp_path / "mixed.html"
    proc = report_command(str(TRACE_DATA / "v2-mixed.jsonl"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    frames = collect([TRACE_DATA / "v2-mixed.jsonl"]).traces
    rendered = render_page_at(chromium, out, 400, LAYOUT_CHECKS)
    found = rendered.checks
    assert rendered.errors == []
    assert_reads_well(found, 400)
    first, *sessions = found["findings"]
    assert f"{len(frames.violations)} protocol violations" in first["text"] and first["href"] == "#violations"
    failed = frames.sessions[(frames.sessions["errors"] + frames.sessions["unanswered"]) > 0]
    outside = frames.calls[frames.calls["session"].isna()]
    assert outside["outcome"].isin(["error", "http-error", "unanswered"]).any()  # a refused request outside any session
    assert len(sessions) == len(failed) + 1 and all(f["href"].startswith("#timeline-") for f in sessions)
    assert sessions[-1]["href"] == "#timeline-outside-0" and f"{len(outside)} calls outside any session" in sessions[-1]["text"]
    assert [s["id"] for s in found["sections"]] == ["summary", "trace-latency", "trace-charts", "trace-outcomes", "violations", "sessions", "timelines"]
    drawn = found["timelines"]
    assert sum(t["bars"] for t in drawn) == len(frames.calls)  # every call of a small trace is drawn
    assert sum(t["lost"] for t in drawn) == int((frames.calls["outcome"] == "unanswered").sum()) > 0
