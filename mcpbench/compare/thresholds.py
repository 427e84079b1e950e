"""`--fail-on` rules: how much worse a step may get before the comparison fails.

    p95>+10%     the p95 grew by more than 10 % of the base's
    p99>+5ms     the p99 grew by more than 5 ms
    errors>+1pp  the error ratio grew by more than 1 percentage point

A rule fails a step only when the change is past it AND unlikely to be noise at the stated
confidence: the interval of the difference lies wholly on the worse side of zero (quantiles), or
the two-proportion test's p-value is under 1 - confidence (errors).
"""

import re
from dataclasses import dataclass

from mcpbench.compare.runs import CompareError

QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}

_RULE = re.compile(r"^\s*(?P<metric>[a-z0-9]+)\s*>\s*\+?\s*(?P<value>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>%|ms|pp)\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class FailOnRule:
    """One `--fail-on` rule: `metric` (p50, p95, p99, errors) grew by more than `value` `unit`."""

    text: str
    metric: str
    value: float
    unit: str  # "%" or "ms" for a quantile, "pp" for errors


def parse_rule(text: str) -> FailOnRule:
    """A rule from its text.

    Raises:
        CompareError: it does not parse (exit 2, naming it and what is expected).
    """
    match = _RULE.match(text)
    expected = "expected p50|p95|p99>+N% or >+Nms, or errors>+Npp (e.g. 'p95>+10%')"
    if match is None:
        raise CompareError(f"--fail-on {text!r}: {expected}")
    metric, unit = match["metric"].lower(), match["unit"].lower()
    if metric not in QUANTILES and metric != "errors":
        raise CompareError(f"--fail-on {text!r}: unknown metric {metric!r}; {expected}")
    if (metric == "errors") != (unit == "pp"):
        raise CompareError(f"--fail-on {text!r}: {'errors take pp' if metric == 'errors' else 'latencies take % or ms'}; {expected}")
    return FailOnRule(text.strip(), metric, float(match["value"]), unit)
