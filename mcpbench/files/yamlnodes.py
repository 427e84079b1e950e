"""Scenario files as YAML nodes that keep their line numbers: every message names `file.yaml:LINE`.

The load's scenarios (`load/scenario.py`) and the lab's experiments (`lab/experiments/`) read
their files with these; the values come out through PyYAML's own constructor.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from mcpbench.protocol.errors import McpbenchError


class ScenarioError(McpbenchError):
    """A scenario file (or a command-line override) cannot be used; the message names file and line."""


def node_value(node: Any) -> Any:
    """A composed YAML node as plain Python values (via PyYAML's own constructor)."""
    import yaml

    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def compose_yaml(path: str | Path) -> Any:
    """The composed YAML node tree of a scenario file (nodes keep their line numbers).

    Raises:
        ScenarioError: the file cannot be read, or is not YAML (naming the file and line).
    """
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenario: {exc.strerror}") from None
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ScenarioError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None


def node_where(source: str, node: Any) -> str:
    """`file.yaml:LINE` of a composed node, the start of every message about it."""
    return f"{source}:{node.start_mark.line + 1}"


def node_mapping(node: Any, source: str, what: str, allowed: tuple[str, ...]) -> dict[str, tuple[Any, Any]]:
    """key -> (key node, value node), rejecting unknown or repeated keys."""
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise ScenarioError(f"{node_where(source, node)}: {what} must be a mapping of keys to values")
    out: dict[str, tuple[Any, Any]] = {}
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if key not in allowed:
            hint = difflib.get_close_matches(str(key), allowed, n=1)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else f" (known: {', '.join(allowed)})"
            raise ScenarioError(f"{node_where(source, key_node)}: unknown key {key!r} in {what}{suggestion}")
        if key in out:
            raise ScenarioError(f"{node_where(source, key_node)}: key {key!r} given twice in {what}")
        out[key] = (key_node, value_node)
    return out
