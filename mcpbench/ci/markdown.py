"""Suites as a Markdown summary: a verdict line, a table with a row per suite, then what failed.

Fit for `$GITHUB_STEP_SUMMARY` (GitHub renders it on the run's page; at most 1 MiB a step) or a
pull-request comment (at most 65,536 characters): the failures after the table are cut, saying so,
before the text passes `MAX_CHARS`. Secrets are redacted by their shape, as in every report.
"""

from collections.abc import Sequence

from mcpbench.ci.cases import ERROR, FAILED, PASSED, SKIPPED, Suite
from mcpbench.trace.redact import Redactor

# Under a pull-request comment's limit (65,536), with room for the cut's own line.
MAX_CHARS = 60_000
MARKS = {PASSED: "✅", FAILED: "❌", ERROR: "⚠️", SKIPPED: "➖"}


def cell(value: object) -> str:
    """A table cell: one line, its pipes escaped."""
    return " ".join(str(value).split()).replace("|", "\\|")


def fenced(text: str) -> list[str]:
    """`text` in a code block whose fence no line of it can close."""
    fence = "```"
    while fence in text:
        fence += "`"
    return [fence, text, fence]


def to_markdown(suites: Sequence[Suite], title: str) -> str:
    """The summary of `suites` under the heading `title`."""
    failing = [suite for suite in suites if suite.status != PASSED]
    cases = sum(len(suite.cases) for suite in suites)
    bad = sum(suite.count(FAILED) + suite.count(ERROR) for suite in suites)
    verdict = (f"{MARKS[PASSED]} {len(suites)} passed, {cases} check(s) without a failure" if not failing else
               f"{MARKS[FAILED]} {len(failing)} of {len(suites)} failed: {bad} of {cases} check(s)")
    lines = [f"### {title}", "", verdict, ""]
    columns = list(dict.fromkeys(key for suite in suites for key in suite.stats)) or ["tests", "failed", "errors", "skipped"]
    lines.append("| | name | " + " | ".join(columns) + " |")
    lines.append("|---|---|" + "---:|" * len(columns))
    for suite in suites:
        stats = suite.stats or {"tests": len(suite.cases), "failed": suite.count(FAILED), "errors": suite.count(ERROR),
                                "skipped": suite.count(SKIPPED)}
        row = [MARKS[suite.status], f"`{cell(suite.name)}`", *(cell(stats.get(column, "")) for column in columns)]
        lines.append("| " + " | ".join(row) + " |")
    body: list[str] = []
    for suite in failing:
        for case in suite.cases:
            if case.status not in (FAILED, ERROR):
                continue
            body += ["", f"<details><summary>{MARKS[case.status]} <code>{_html(suite.name)}</code> › "
                         f"{_html(case.name)}: {_html(case.message)}</summary>", "", *fenced(case.detail or case.message),
                     "", "</details>"]
        for note in suite.notes:
            body += ["", f"- `{cell(suite.name)}`: {cell(note)}"]
    text = "\n".join(lines)
    if body:
        text += "\n\n#### What failed\n" + "\n".join(body)
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS].rsplit("\n<details>", 1)[0] + "\n\n… cut here: see the JUnit file or the JSON report for the rest"
    return Redactor().text(text) + "\n"


def _html(text: str) -> str:
    """Text inside an HTML element on one line (a `<summary>` shows no Markdown)."""
    return " ".join(text.split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
