"""What a command found, as CI systems count it: suites of test cases, each passed, failed, an error or skipped.

A failure is the measured thing failing (a changed answer, a violation, a threshold); an error is
the check not running to its end (the target broke off); skipped is what was not checked.
"""

from dataclasses import dataclass, field
from typing import Any

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
STATUSES = (PASSED, FAILED, ERROR, SKIPPED)


@dataclass(slots=True)
class Case:
    """One test case.

    `message` is one line (a failure's headline); `detail` the whole story (every changed path);
    `output` what a reader may want besides (latencies); `time` in seconds.
    """

    name: str
    classname: str
    status: str = PASSED
    message: str = ""
    detail: str = ""
    time: float | None = None
    output: str = ""


@dataclass(slots=True)
class Suite:
    """A suite of cases: one trace's replay, one trace's violations, one load run's thresholds.

    `stats` are the columns of this suite's row in the Markdown table (counts of calls, say), in
    order; without them the row shows the case counts.
    """

    name: str
    cases: list[Case] = field(default_factory=list)
    time: float | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for case in self.cases if case.status == status)

    @property
    def status(self) -> str:
        """The suite's worst case: error, then failed, then passed (a suite of skipped cases passes)."""
        for status in (ERROR, FAILED):
            if self.count(status):
                return status
        return PASSED
