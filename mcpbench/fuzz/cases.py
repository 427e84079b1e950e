"""What to send: a tool's arguments, valid or breaking its `inputSchema` one way at a time.

Hypothesis draws every choice (so a run repeats from its seed, and a finding shrinks): first the
arguments to start from (a recorded call's, when traces were given, else ones generated from the
schema by `schemas.py`), then one mutation of `KINDS` ("valid" first: the one shrinking
goes towards). Whether a mutated case still fits the schema is `judge.py`'s question, not this one's.
"""

import copy
import json
from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import strategies as st

from mcpbench.fuzz.schemas import from_schema

# The mutations, in the order shrinking prefers (the first is no mutation).
VALID, SEEDED = "valid", "seeded"
MISSING, WRONG_TYPE, EXTRA, BOUNDARY, ODD_STRING, NESTING = (
    "missing-required", "wrong-type", "extra-property", "boundary-number", "odd-string", "deep-nesting")
KINDS = (VALID, MISSING, WRONG_TYPE, EXTRA, BOUNDARY, ODD_STRING, NESTING)

# Values of another type than a property's, tried in order until one breaks its schema: objects and
# lists first, which no lax validator (pydantic's, say) turns into a number or a string.
WRONG_VALUES: tuple[Any, ...] = ({"fuzz": 1}, ["fuzz"], "fuzz", 1.5, True, None, 7)

# Numbers at the edges of what programs hold: 32- and 64-bit limits, float precision, zero's sign.
EDGE_NUMBERS: tuple[Any, ...] = (0, -1, 2**31 - 1, 2**31, -(2**31) - 1, 2**53 + 1, 2**63, -(2**63) - 1, 1e308, -1e308, -0.0, 0.5)

# Strings that programs mishandle: empty, control characters, direction overrides, astral
# characters, format directives, paths, quoting, and a long one (256 KiB: far past a field, well
# under any message limit).
ODD_STRINGS: tuple[str, ...] = (
    "", " ", "\x00", "\r\n", "\u202eevil", "\U0001f600" * 64, "%s%s%n", "../../../../etc/passwd", "' OR '1'='1",
    "{{7*7}}", "\\", "A" * 262144,
)

# How deep a nested value goes: past most recursive code, and under the nesting the official SDK
# parses at all (arguments nested 200 deep are dropped unanswered: a protocol case, not an argument one).
NESTING_DEPTHS = (32, 100)

# The name of the property an extra-property case adds.
EXTRA_NAME = "mcpbench_fuzz_extra"


def dumps(value: Any, indent: bool = False) -> bytes:
    """JSON bytes of a case's arguments or of what holds them: orjson's, or the standard library's where
    a number is past 64 bits (orjson refuses -2**63 - 1, an `EDGE_NUMBERS` value; JSON has no limit)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0))
    except TypeError:
        return json.dumps(value, ensure_ascii=False, indent=2 if indent else None, separators=None if indent else (",", ":"),
                          default=str).encode()


@dataclass(frozen=True)
class CallCase:
    """One tools/call: `arguments` for `tool`; `kind` the mutation (`KINDS`), `path` the property it touched."""

    tool: str
    kind: str
    arguments: Any
    path: str = ""
    seeded: bool = False  # it started from a recorded call's arguments

    def describe(self) -> str:
        where = f" {self.path}" if self.path else ""
        start = "recorded " if self.seeded else ""
        return f"{start}{self.kind}{where}"


def generation_schema(schema: dict) -> dict:
    """The schema valid arguments are drawn from: an object's (MCP's arguments are one), whatever it leaves unsaid."""
    out = dict(schema or {})
    out.setdefault("type", "object")
    return out


def valid_arguments(schema: dict) -> st.SearchStrategy:
    """Arguments drawn from the tool's `inputSchema` (`schemas.py`)."""
    return from_schema(generation_schema(schema))


def _properties(schema: dict) -> dict[str, dict]:
    props = (schema or {}).get("properties")
    return props if isinstance(props, dict) else {}


def _types(sub: Any) -> set[str]:
    kind = sub.get("type") if isinstance(sub, dict) else None
    return set(kind) if isinstance(kind, list) else {kind} if kind else set()


def _breaks(sub: Any, value: Any) -> bool:
    from jsonschema import Draft202012Validator

    try:
        return not Draft202012Validator(sub if isinstance(sub, dict) else {}).is_valid(value)
    except Exception:  # noqa: BLE001 - a property schema jsonschema cannot use: any value may break it
        return True


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for level in range(depth):
        value = [value] if level % 2 else {"n": value}
    return value


@st.composite
def cases(draw, tool: str, schema: dict, seeds: tuple[Any, ...] = ()) -> CallCase:
    """One case for `tool`: arguments to start from, then one mutation."""
    seeded = bool(seeds) and draw(st.booleans().map(lambda b: not b))  # shrinks towards a recorded call
    if seeded:
        arguments = copy.deepcopy(draw(st.sampled_from(seeds)))
    else:
        arguments = draw(valid_arguments(schema))
    if not isinstance(arguments, dict):
        arguments = {}
    kind = draw(st.sampled_from(KINDS))
    props = _properties(schema)
    if kind == VALID:
        return CallCase(tool, VALID, arguments, seeded=seeded)
    if kind == MISSING:
        required = [name for name in (schema or {}).get("required") or () if name in arguments]
        if not required:
            return CallCase(tool, VALID, arguments, seeded=seeded)
        name = draw(st.sampled_from(required))
        del arguments[name]
        return CallCase(tool, kind, arguments, name, seeded)
    if kind == EXTRA:
        arguments[EXTRA_NAME] = draw(st.sampled_from(("x", 1, None)))
        return CallCase(tool, kind, arguments, EXTRA_NAME, seeded)
    if kind == WRONG_TYPE:
        if not props:
            return CallCase(tool, VALID, arguments, seeded=seeded)
        name = draw(st.sampled_from(sorted(props)))
        arguments[name] = next((v for v in WRONG_VALUES if _breaks(props[name], v)), WRONG_VALUES[0])
        return CallCase(tool, kind, arguments, name, seeded)
    if kind == BOUNDARY:
        numeric = sorted(name for name, sub in props.items() if _types(sub) & {"integer", "number"})
        if not numeric:
            return CallCase(tool, VALID, arguments, seeded=seeded)
        name = draw(st.sampled_from(numeric))
        sub = props[name]
        edges = [sub[key] + step for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
                 if isinstance(sub.get(key), int | float) for step in (-1, 0, 1)]
        arguments[name] = draw(st.sampled_from(edges + list(EDGE_NUMBERS)))
        return CallCase(tool, kind, arguments, name, seeded)
    strings = sorted(name for name, sub in props.items() if "string" in _types(sub))
    targets = strings if kind == ODD_STRING else sorted(props)
    if not targets:
        return CallCase(tool, VALID, arguments, seeded=seeded)
    name = draw(st.sampled_from(targets))
    if kind == ODD_STRING:
        arguments[name] = draw(st.sampled_from(ODD_STRINGS))
    else:
        arguments[name] = _nested(draw(st.sampled_from(NESTING_DEPTHS)))
    return CallCase(tool, kind, arguments, name, seeded)


__all__ = ["CallCase", "KINDS", "cases", "generation_schema", "valid_arguments"]
