"""JUnit XML and the Markdown summary (mcpbench/ci/): counts, messages, escaping, limits, secrets."""

from xml.etree import ElementTree

from mcpbench.ci import markdown
from mcpbench.ci.cases import ERROR, FAILED, PASSED, SKIPPED, Case, Suite
from mcpbench.ci.junit import to_xml
from mcpbench.ci.markdown import to_markdown

SECRET = "http://h/mcp?api_key=abc123def456"


def suites() -> list[Suite]:
    return [
        Suite("a.jsonl", [Case("call 1", "c", PASSED, time=0.5, output="latency 1 ms"),
                          Case("call 2", "c", FAILED, message="changed: x", detail="x: 1 → 2\nvia " + SECRET),
                          Case("call 3", "c", SKIPPED, message="not sent")], time=1.25),
        Suite("b|c.jsonl", [Case("replay", "c", ERROR, message="target gone\x00\x1b", detail="target gone")]),
    ]


def test_junit_counts_messages_and_bodies():
    root = ElementTree.fromstring(to_xml(suites(), "mcpbench replay"))
    assert root.tag == "testsuites" and root.get("name") == "mcpbench replay"
    assert [root.get(k) for k in ("tests", "failures", "errors", "skipped")] == ["4", "1", "1", "1"]
    first, second = root.findall("testsuite")
    assert (first.get("name"), first.get("tests"), first.get("failures"), first.get("time")) == ("a.jsonl", "3", "1", "1.250")
    cases = first.findall("testcase")
    assert cases[0].find("system-out").text == "latency 1 ms" and cases[0].get("time") == "0.500"
    failure = cases[1].find("failure")
    assert failure.get("message") == "changed: x" and failure.text.startswith("x: 1 → 2")
    assert "abc123def456" not in failure.text  # redacted by shape
    assert cases[2].find("skipped").get("message") == "not sent"
    error = second.find("testcase").find("error")
    assert error.get("message") == "target gone"  # characters XML cannot hold are left out


def test_markdown_table_verdict_and_what_failed():
    text = to_markdown(suites(), "mcpbench replay")
    lines = text.splitlines()
    assert lines[0] == "### mcpbench replay"
    assert lines[2].startswith("❌ 2 of 2 failed: 2 of 4 check(s)")
    assert "| | name | tests | failed | errors | skipped |" in lines
    assert "| ❌ | `a.jsonl` | 3 | 1 | 0 | 1 |" in lines
    assert "| ⚠️ | `b\\|c.jsonl` | 1 | 0 | 1 | 0 |" in lines  # a pipe in a cell is escaped
    assert "<details><summary>❌ <code>a.jsonl</code> › call 2: changed: x</summary>" in lines
    assert "abc123def456" not in text


def test_markdown_stats_are_the_columns_and_a_pass_says_so():
    suite = Suite("t.jsonl", [Case("t", "c")], stats={"calls": 9, "changed": 0})
    text = to_markdown([suite], "mcpbench replay")
    assert "✅ 1 passed, 1 check(s) without a failure" in text
    assert "| ✅ | `t.jsonl` | 9 | 0 |" in text and "What failed" not in text


def test_a_code_block_is_fenced_longer_than_any_fence_inside():
    assert markdown.fenced("a\n```\nb") == ["````", "a\n```\nb", "````"]


def test_a_long_summary_is_cut_before_the_limit_saying_so():
    many = [Suite(f"t{i}.jsonl", [Case("c", "c", FAILED, message="m", detail="x" * 2000)]) for i in range(100)]
    text = to_markdown(many, "mcpbench replay")
    assert len(text) <= markdown.MAX_CHARS + 200
    assert text.rstrip().endswith("see the JUnit file or the JSON report for the rest")
    assert text.count("<details>") == text.count("</details>")
