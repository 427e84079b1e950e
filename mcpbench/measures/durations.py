"""Durations as people write them (`10`, `10s`, `500ms`, `2m`, `1h`), read the same by load
scenarios, the lab's experiments and the fault options."""

import math
import re
from typing import Any, Final

_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any, what: str = "duration") -> float:
    """`10`, `10s`, `500ms`, `2m`, `1h` -> seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number of seconds or like 10s, 500ms, 2m")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"{what} {value!r} is not a duration (like 10s, 500ms, 2m)")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not math.isfinite(seconds):
        raise ValueError(f"{what} must be a finite number of seconds")
    if seconds < 0:
        raise ValueError(f"{what} must not be negative")
    return seconds
