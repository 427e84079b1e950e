"""`--fail-on` rules."""

import pytest

from mcpbench.compare.runs import CompareError
from mcpbench.compare.thresholds import FailOnRule, parse_rule


@pytest.mark.parametrize(("text", "rule"), [
    ("p95>+10%", FailOnRule("p95>+10%", "p95", 10.0, "%")),
    (" P99 > 5ms ", FailOnRule("P99 > 5ms", "p99", 5.0, "ms")),
    ("p50>+2.5%", FailOnRule("p50>+2.5%", "p50", 2.5, "%")),
    ("errors>+1pp", FailOnRule("errors>+1pp", "errors", 1.0, "pp")),
])
def test_rules_parse(text, rule):
    assert parse_rule(text) == rule


@pytest.mark.parametrize(("text", "says"), [
    ("p95>>10%", "expected"),
    ("p95<+10%", "expected"),
    ("p90>+10%", "unknown metric 'p90'"),
    ("errors>+1%", "errors take pp"),
    ("p95>+1pp", "latencies take % or ms"),
    ("", "expected"),
])
def test_a_rule_that_does_not_parse_is_named(text, says):
    with pytest.raises(CompareError) as caught:
        parse_rule(text)
    assert f"--fail-on {text!r}" in str(caught.value) and says in str(caught.value)
    assert caught.value.exit_code == 2
