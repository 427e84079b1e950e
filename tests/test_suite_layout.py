"""The suite's own layout: shared test code lives in helper modules, never in a test module or a conftest.

A test module imported by another runs its module-level code twice under two names, and ties the two
files' edits together; a conftest is pytest's to load. Helpers go to tests/support/ or a folder's helpers.py.
"""

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(TESTS.parent).with_suffix("").parts)


def imported_modules(source: str, module: str) -> list[str]:
    """Every module an import statement of `source` (the code of `module`) may name, relative ones resolved."""
    package = module.rsplit(".", 1)[0]
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.append(base)
            found += [f"{base}.{alias.name}" for alias in node.names]  # `from tests.x import test_y`
    return found


def forbidden(name: str) -> bool:
    """A test module or a conftest of this suite."""
    parts = name.split(".")
    return parts[0] == "tests" and (parts[-1] == "conftest" or parts[-1].startswith("test_"))


def offenders(source: str, module: str) -> list[str]:
    return sorted({name for name in imported_modules(source, module) if forbidden(name)})


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tests.replay.test_get_stream import LIST_CHANGED", ["tests.replay.test_get_stream"]),
        ("import tests.conftest", ["tests.conftest"]),
        ("def f():\n    from tests.conftest import X", ["tests.conftest"]),
        ("from .test_up import alive", ["tests.lab.test_up"]),
        ("from .. import conftest", ["tests.conftest"]),
        ("from tests.lab import test_up", ["tests.lab.test_up"]),
        ("from tests.lab.helpers import wait\nfrom tests.support.servers import HOST\nimport pytest", []),
    ],
)
def test_the_check_finds_imports_of_test_modules_and_conftests(source, expected):
    assert offenders(source, "tests.lab.test_x") == expected


def test_no_test_module_or_conftest_is_imported():
    paths = sorted(TESTS.rglob("*.py"))
    assert len(paths) > 50  # the walk really saw the suite
    found = {module_name(path): offenders(path.read_text(), module_name(path)) for path in paths}
    assert {module: names for module, names in found.items() if names} == {}
