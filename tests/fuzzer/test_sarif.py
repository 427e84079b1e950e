"""`--sarif`: the findings as a SARIF 2.1.0 log, checked against the structure code scanning requires."""

from pathlib import Path

import orjson

from mcpbench.fuzz.cases import VALID, CallCase
from mcpbench.fuzz.findings import Finding
from mcpbench.fuzz.judge import CLASSES, CRASH, LEAK, SLOW
from mcpbench.fuzz.sarif import to_sarif
from tests.fuzzer.helpers import check_sarif

def test_the_check_catches_a_broken_log():
    bad = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x", "rules": []}}, "results": [{"ruleId": "crash"}]}]}
    try:
        check_sarif(bad)
    except AssertionError as exc:
        assert "'level' is a required property" in str(exc)
    else:
        raise AssertionError("a result without level, message and locations passed")


def test_one_result_per_finding_a_rule_per_class_the_tool_named(tmp_path):
    trace = tmp_path / "findings" / "001-crash-divide.jsonl"
    findings = [Finding(CRASH, CallCase("divide", VALID, {"a": 1, "b": 0}), "the process exited with status 3", trace=trace),
                Finding(LEAK, CallCase("parse", "odd-string", {"text": ""}), "a stack trace: Traceback (most recent call last)"),
                Finding(SLOW, CallCase("echo", VALID, {}), "answered in 3.10 s")]
    log = orjson.loads(orjson.dumps(to_sarif(findings, target="stdio:server", seed=7, version="0.1.0", base=tmp_path)))
    check_sarif(log)
    run = log["runs"][0]
    assert [rule["id"] for rule in run["tool"]["driver"]["rules"]] == list(CLASSES)
    assert [(r["ruleId"], r["level"]) for r in run["results"]] == [("crash", "error"), ("leak", "error"), ("slow", "note")]
    crash = run["results"][0]
    assert crash["locations"][0]["logicalLocations"][0]["name"] == "divide"
    assert crash["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "findings/001-crash-divide.jsonl"
    assert "exited with status 3" in crash["message"]["text"] and '"b":0' in crash["message"]["text"]
    assert "physicalLocation" not in run["results"][1]["locations"][0]  # no trace written: the tool alone


def test_no_findings_is_a_valid_log_with_no_results():
    log = to_sarif([], target="http://127.0.0.1:1/mcp", seed=1, version="0.1.0")
    check_sarif(log)
    assert log["runs"][0]["results"] == [] and Path(log["$schema"]).name == "sarif-2.1.0.json"
