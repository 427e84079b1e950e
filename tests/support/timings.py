"""Each test module's seconds in a whole run (tests/module_seconds.json), so the conftest can send the
longest modules to the workers first: with the longest first and the short ones last, the two workers
end within a short module of each other (longest-processing-time-first), where an order by number of
slow tests left one worker running a long module alone at the end.

`./dev test --store-durations` rewrites the file from the run: every module that ran gets its seconds
(setup, call and teardown of its tests, its module fixtures included), the others keep theirs.
"""

from collections import Counter
from pathlib import Path
from typing import Final

import orjson
import pytest

FILE: Final = Path(__file__).resolve().parents[1] / "module_seconds.json"
# A module the file does not know yet (new since it was written): a guess from its tests' marks.
GUESS_SLOW: Final = 5.0
GUESS_QUICK: Final = 0.2


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def stored() -> dict[str, float]:
    try:
        return orjson.loads(FILE.read_bytes())
    except FileNotFoundError:
        return {}


def seconds_by_module(items: list[pytest.Item]) -> dict[str, float]:
    """The stored seconds of each module of `items`, or a guess for one not in the file."""
    known = stored()
    guess: Counter[str] = Counter()
    for item in items:
        guess[module_of(item.nodeid)] += GUESS_SLOW if item.get_closest_marker("slow") else GUESS_QUICK
    return {module: known.get(module, guessed) for module, guessed in guess.items()}


class Recorder:
    """Adds up the reports' durations by module (on xdist's controller, every worker's reports) and
    writes them into the file when the session ends."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[module_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self) -> None:
        merged = stored() | {module: round(seconds, 1) for module, seconds in self.seconds.items()}
        FILE.write_bytes(orjson.dumps(merged, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
