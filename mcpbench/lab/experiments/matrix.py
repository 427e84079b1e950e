"""A lab scenario read once for every experiment: the experiment's lists beside a load scenario.

A lab scenario is a load scenario without a target or session mode, plus the keys that span the
experiment's matrix (sticky: `modes`, `policies`, …; reconnect: `transports`, `faults`, …). The
lists are taken out and checked as one mapping; the rest becomes the load scenario every cell
runs, with the placeholder target and the session mode the lab sets (each cell then sets its own
target)::

    matrix = Matrix.read(root, "s.yaml", "sticky", ("modes", "policies"), shape="modes, policies, mix, …")
    matrix.items("modes")          # ["stateless"]: a single value is a list of one; None when absent
    matrix.where("modes")          # "s.yaml:3", the start of a message about that list
    scenario = matrix.scenario("session_per_task")

Every problem is a `ScenarioError` naming the file and line.
"""

from __future__ import annotations

from typing import Any, Final

from mcpbench.load.scenario import Scenario, scenario_from_node
from mcpbench.files.yamlnodes import ScenarioError, node_mapping, node_value, node_where

# The target of the scenario part; every cell sets its own (a balancer's URL, a stdio command).
PLACEHOLDER_TARGET: Final = "http://127.0.0.1:9/mcp"
# What the lab sets for each cell, so a lab scenario may not.
LAB_SET: Final = ("target", "session")
_STR: Final = "tag:yaml.org,2002:str"


class Matrix:
    """An experiment's lists (`lists`: key -> (key node, value node)) and the rest of its scenario."""

    def __init__(self, root: Any, source: str, lists: dict[str, tuple[Any, Any]], rest: list[tuple[Any, Any]]) -> None:
        self.root = root
        self.source = source
        self.lists = lists
        self.rest = rest

    @classmethod
    def read(cls, root: Any, source: str, kind: str, keys: tuple[str, ...], *, shape: str) -> Matrix:
        """Split the composed YAML `root` of a `kind` scenario into the lists named by `keys` and the rest.

        Raises:
            ScenarioError: `root` is not a mapping (`shape` lists what it holds), it sets what the lab
                sets, or a list key is repeated.
        """
        import yaml

        if not isinstance(root, yaml.MappingNode):
            raise ScenarioError(f"{source}: a {kind} scenario is a mapping ({shape})")

        def listed(key: Any) -> bool:
            return isinstance(key, yaml.ScalarNode) and key.value in keys

        rest = [(k, v) for k, v in root.value if not listed(k)]
        for key, _ in rest:
            if isinstance(key, yaml.ScalarNode) and key.value in LAB_SET:
                raise ScenarioError(f"{node_where(source, key)}: a {kind} scenario sets no {key.value!r}: the lab sets it for each cell")
        lists = yaml.MappingNode(root.tag, [(k, v) for k, v in root.value if listed(k)], root.start_mark, root.end_mark)
        return cls(root, source, node_mapping(lists, source, "the lab's lists", keys), rest)

    def __contains__(self, key: str) -> bool:
        return key in self.lists

    def value(self, key: str) -> Any:
        """The plain value given for `key` (which must be given)."""
        return node_value(self.lists[key][1])

    def where(self, key: str) -> str:
        """`file:line` of the value given for `key`."""
        return node_where(self.source, self.lists[key][1])

    def items(self, key: str) -> list | None:
        """The values listed for `key` (a single value: a list of one), or None when it is not given."""
        if key not in self.lists:
            return None
        value = self.value(key)
        return value if isinstance(value, list) else [value]

    def scenario(self, session: str) -> Scenario:
        """The load scenario of every cell: the rest, with the placeholder target and `session` mode.

        Raises:
            ScenarioError: naming the file and line of the first problem.
        """
        import yaml

        mark = self.root.start_mark
        rest = self.rest + [
            (yaml.ScalarNode(_STR, "target", mark, mark), yaml.ScalarNode(_STR, PLACEHOLDER_TARGET, mark, mark)),
            (yaml.ScalarNode(_STR, "session", mark, mark), yaml.ScalarNode(_STR, session, mark, mark)),
        ]
        return scenario_from_node(yaml.MappingNode(self.root.tag, rest, self.root.start_mark, self.root.end_mark), self.source)
