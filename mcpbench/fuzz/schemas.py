"""Valid values from a JSON Schema, as a Hypothesis strategy: the subset tool schemas use.

hypothesis-jsonschema would be the kept library for this, but its last release (0.23.1) draws
objects with a private Hypothesis helper (`conjecture.utils.many(...).more()`) that the Hypothesis
this project runs no longer has: every object schema fails. This module covers what MCP tools
declare: `type` (one or a list), `const`, `enum`, `anyOf`/`oneOf`, `allOf` (its first part), local
`$ref`s (`#/$defs/...`, `#/definitions/...`), number bounds (exclusive too), string lengths and
patterns, array items and sizes, object properties with `required`. A value it draws may still
miss a rule it does not read (`format`, `uniqueItems`, ...): the judge validates with jsonschema.
"""

from typing import Any

from hypothesis import strategies as st

# Generated strings and arrays stay short: the odd and huge ones are the mutations' job.
MAX_TEXT = 24
MAX_ITEMS = 4
# How deep `$ref`s are followed before a recursive schema is cut (to null).
MAX_DEPTH = 6

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=MAX_TEXT))


def _resolve(ref: str, root: dict) -> dict:
    node: Any = root
    for part in ref.removeprefix("#/").split("/") if ref.startswith("#/") else ():
        node = node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def from_schema(schema: Any, root: dict | None = None, depth: int = 0) -> st.SearchStrategy:
    """Values meant to fit `schema` (`root`: where its `$ref`s point)."""
    if schema is True or schema == {}:
        return _SCALARS
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return st.none()
    root = root if root is not None else schema
    if "$ref" in schema and isinstance(schema["$ref"], str):
        return from_schema({**_resolve(schema["$ref"], root), **{k: v for k, v in schema.items() if k != "$ref"}}, root, depth + 1)
    if "const" in schema:
        return st.just(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            rest = {k: v for k, v in schema.items() if k != key}
            return st.one_of([from_schema({**rest, **part} if isinstance(part, dict) else part, root, depth + 1) for part in schema[key]])
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        first = schema["allOf"][0]
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        return from_schema({**rest, **first} if isinstance(first, dict) else rest, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": one}, root, depth) for one in kind]) if kind else _SCALARS
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else None
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return _integers(schema)
    if kind == "number":
        return _numbers(schema)
    if kind == "string":
        return _strings(schema)
    if kind == "array":
        items = schema.get("items")
        low = int(schema.get("minItems") or 0)
        high = max(low, min(int(schema.get("maxItems", MAX_ITEMS)), low + MAX_ITEMS))
        return st.lists(from_schema(items if items is not None else {}, root, depth + 1), min_size=low, max_size=high)
    if kind == "object":
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = [name for name in schema.get("required") or () if isinstance(name, str)]
        return st.fixed_dictionaries(
            {name: from_schema(props.get(name, {}), root, depth + 1) for name in required},
            optional={name: from_schema(sub, root, depth + 1) for name, sub in props.items() if name not in required},
        )
    return _SCALARS


def _bound(schema: dict, key: str, exclusive: str) -> tuple[float | None, bool]:
    value = schema.get(exclusive)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value, True
    value = schema.get(key)
    return (value, False) if isinstance(value, int | float) and not isinstance(value, bool) else (None, False)


def _integers(schema: dict) -> st.SearchStrategy:
    import math

    low, low_open = _bound(schema, "minimum", "exclusiveMinimum")
    high, high_open = _bound(schema, "maximum", "exclusiveMaximum")
    low_i = None if low is None else (math.floor(low) + 1 if low_open or low != math.floor(low) else int(low))
    high_i = None if high is None else (math.ceil(high) - 1 if high_open or high != math.ceil(high) else int(high))
    if low_i is not None and high_i is not None and low_i > high_i:
        return st.nothing()
    return st.integers(low_i, high_i)


def _numbers(schema: dict) -> st.SearchStrategy:
    low, low_open = _bound(schema, "minimum", "exclusiveMinimum")
    high, high_open = _bound(schema, "maximum", "exclusiveMaximum")
    return st.floats(low, high, exclude_min=low_open and low is not None, exclude_max=high_open and high is not None,
                     allow_nan=False, allow_infinity=False)


def _strings(schema: dict) -> st.SearchStrategy:
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            return st.from_regex(pattern, fullmatch=True)
        except Exception:  # noqa: BLE001 - a pattern Python's re cannot read: plain text
            pass
    low = int(schema.get("minLength") or 0)
    high = max(low, min(int(schema.get("maxLength", low + MAX_TEXT)), low + MAX_TEXT))
    return st.text(min_size=low, max_size=high)


__all__ = ["from_schema"]
