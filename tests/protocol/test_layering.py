"""Version rules live once, in the core: no module outside `mcpbench/protocol/` compares an era
or a protocol version; it asks `protocol/versions.py` (`has_handshake`, `has_method`, …)."""

import ast
from pathlib import Path

import pytest

import mcpbench
from mcpbench.protocol import versions

PACKAGE = Path(mcpbench.__file__).parent
CORE = PACKAGE / "protocol"
VERSION_TEXTS = frozenset(versions.VERSIONS)
# The core's names for a version: V2026_07_28, LATEST, LATEST_HANDSHAKE, HTTP_DEFAULT_VERSION, …
VERSION_NAMES = frozenset(name for name, value in vars(versions).items() if isinstance(value, str) and value in VERSION_TEXTS)


def _version_or_era(node: ast.AST) -> str | None:
    """What makes `node`, one side of a comparison, a version or an era; None when nothing does."""
    if isinstance(node, ast.Constant) and node.value in VERSION_TEXTS:
        return f"the version {node.value!r}"
    if isinstance(node, ast.Name) and node.id in VERSION_NAMES:
        return f"the version constant {node.id}"
    if isinstance(node, ast.Attribute):
        if node.attr in VERSION_NAMES:
            return f"the version constant {node.attr}"
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id == "Era") or (isinstance(owner, ast.Attribute) and owner.attr == "Era"):
            return f"Era.{node.attr}"
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return next((found for item in node.elts if (found := _version_or_era(item))), None)
    return None


def _era_valued(node: ast.AST) -> bool:
    """`x.era` or `era_of(…)`: an era, which the core compares, not its callers."""
    if isinstance(node, ast.Attribute) and node.attr == "era":
        return True
    func = node.func if isinstance(node, ast.Call) else None
    return (isinstance(func, ast.Name) and func.id == "era_of") or (isinstance(func, ast.Attribute) and func.attr == "era_of")


def comparisons(source: str) -> list[tuple[int, str]]:
    """(line, what) of each comparison in `source` that involves a version or an era.

    An era compared with None only (`era_of(v) is None`: is the version known?) is no era rule.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            what = next((w for operand in operands if (w := _version_or_era(operand))), None)
            is_none = any(isinstance(o, ast.Constant) and o.value is None for o in operands)
            if what is None and not is_none and any(_era_valued(o) for o in operands):
                what = "an era"
            if what is not None:
                found.append((node.lineno, f"compares {what}"))
        elif isinstance(node, ast.MatchValue) and (what := _version_or_era(node.value)):
            found.append((node.lineno, f"matches {what}"))
    return found


def test_no_module_outside_the_core_compares_eras_or_versions():
    modules = [path for path in sorted(PACKAGE.rglob("*.py")) if CORE not in path.parents]
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in modules
        for line, what in comparisons(path.read_text())
    ]
    assert found == [], "ask mcpbench.protocol.versions instead:\n" + "\n".join(found)
    assert len(modules) > 50  # the walk saw the package


@pytest.mark.parametrize("source", [
    "if era_of(version) is Era.STATELESS: pass",  # load/scenario.py, before
    "if any(c.method == 'ping' for c in mix) and '2026-07-28' in modes: pass",  # the sticky experiment, before
    "if self.era is not self.recorded_era: pass",  # replay/engine.py, before
    "ok = a.era and b.era and a.era is not b.era",  # replay/report.py, before
    "ok = version == V2026_07_28",
    "ok = version != versions.LATEST_HANDSHAKE",
    "ok = version in ('2024-11-05', '2025-03-26')",
    "ok = e is versions.Era.HANDSHAKE",
    "ok = era_of(a) == era_of(b)",
    "match version:\n    case '2025-06-18':\n        pass",
    "match era:\n    case Era.STATELESS:\n        pass",
])
def test_the_check_finds_an_era_rule(source):
    assert len(comparisons(source)) == 1


@pytest.mark.parametrize("source", [
    "if era_of(version) is None: version = LATEST_HANDSHAKE",  # is it known?
    "raise ValueError(f'ping does not exist in {version}')",
    "MODES = {'2026-07-28': ('streamable-http', V2026_07_28)}",
    "ok = transport == 'sse' and has_handshake(version)",
    "ok = has_handshake(a) is has_handshake(b)",
])
def test_the_check_lets_the_rest_pass(source):
    assert comparisons(source) == []


# Bytes become messages in the core only: its observer, client and server roles decode them.
BYTE_DECODERS = frozenset({"decode"})


def byte_decodes(source: str) -> list[int]:
    """Lines of `source` that call `jsonrpc.decode` (bytes → a message), or import it to call it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in BYTE_DECODERS:
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "jsonrpc":
                found.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "mcpbench.protocol.jsonrpc":
            if any(alias.name in BYTE_DECODERS for alias in node.names):
                found.append(node.lineno)
    return found


def test_no_module_outside_the_core_decodes_json_rpc_bytes():
    modules = [path for path in sorted(PACKAGE.rglob("*.py")) if CORE not in path.parents]
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in modules for line in byte_decodes(path.read_text())]
    assert found == [], "read bytes through the core's observer, client or server role instead:\n" + "\n".join(found)


@pytest.mark.parametrize("source, lines", [
    ("message = jsonrpc.decode(body)", [1]),  # record/classify.py, before
    ("from mcpbench.protocol.jsonrpc import decode, Request", [1]),
    ("message = jsonrpc.from_obj(event['msg'])", []),  # a trace's parsed object, not bytes
    ("text = raw.decode('utf-8')", []),
])
def test_the_decode_check_finds_byte_decoding(source, lines):
    assert byte_decodes(source) == lines
