"""The package's layers: no import runs back up them, and no package imports another's private names.

The ranks are written down here, once (ARCHITECTURE.md shows them; a test keeps the two equal). A module may import its own layer and the layers below it; the rank of a
module is that of the longest dotted prefix in `LAYERS` (`mcpbench` alone is the package's own
`__init__`, its version). Every import counts: `import x`, `from x import y` (y a module or a
name), relative ones, and those inside functions (the heavy ones are imported there).
"""

import ast
import re
from pathlib import Path

import pytest

import mcpbench

PACKAGE = Path(mcpbench.__file__).resolve().parent
ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"

LAYERS: dict[str, int] = {
    "mcpbench": 0,  # __init__.py: the version
    "mcpbench.protocol": 0,
    "mcpbench.trace": 1,
    "mcpbench.files": 1,  # whole-file outputs, writes to a descriptor, scenario files' YAML with line numbers
    "mcpbench.system": 1,  # child processes started and stopped, free ports, the stop signals; listen checks; targets
    "mcpbench.measures": 1,  # durations as written, percentiles
    "mcpbench.auth": 1,
    "mcpbench.transport": 1,  # the one transport interface, its thread and gevent shells, MockTransport
    "mcpbench.cliutil": 2,
    "mcpbench.ci": 2,
    "mcpbench.stdio": 3,
    "mcpbench.record": 3,
    "mcpbench.proxies": 3,
    "mcpbench.wrap": 3,  # hosts' configs rewritten to run servers through the tee
    "mcpbench.companions": 3,  # what a recorder runs beside itself (the live view, its telemetry) and its options
    "mcpbench.replay": 4,
    "mcpbench.load": 4,
    "mcpbench.analysis": 5,
    "mcpbench.probe": 5,
    "mcpbench.capacity": 5,
    "mcpbench.compare": 5,
    "mcpbench.fuzz": 5,
    "mcpbench.live": 6,
    "mcpbench.telemetry": 6,
    "mcpbench.lab.peers": 6,
    "mcpbench.lab.topology": 7,
    "mcpbench.testing": 7,
    "mcpbench.lab.experiments": 8,
    "mcpbench.lab": 9,  # lab/cli.py
    "mcpbench.bench": 10,
    "mcpbench.cli": 10,  # the command line and the main job (cli/pipeline.py)
    "mcpbench.__main__": 10,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(module: str) -> bool:
    return (PACKAGE.parent.joinpath(*module.split(".")) / "__init__.py").exists()


def is_module(module: str) -> bool:
    return is_package(module) or PACKAGE.parent.joinpath(*module.split(".")).with_suffix(".py").exists()


def package_of(module: str) -> str:
    """The package a module belongs to: itself for a package, else its parent."""
    return module if is_package(module) else module.rpartition(".")[0]


def rank(module: str) -> int | None:
    """The layer of `module`, or None when no entry of LAYERS covers it."""
    if module == "mcpbench":
        return LAYERS["mcpbench"]
    keys = [key for key in LAYERS if key != "mcpbench" and (module == key or module.startswith(key + "."))]
    return LAYERS[max(keys, key=len)] if keys else None


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def imports(source: str, module: str) -> list[tuple[int, str, str | None]]:
    """(line, module imported, name taken from it or None) of every mcpbench import in `source`."""
    here = package_of(module)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names if alias.name.split(".")[0] == "mcpbench"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importer's package, one level up per extra dot
                parent = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                base = f"{parent}.{base}" if base else parent
            if base.split(".")[0] != "mcpbench":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub, None) if is_module(sub) else (node.lineno, base, alias.name))
    return found


def offences(source: str, module: str) -> list[str]:
    """What `source`, the code of `module`, imports against the layers or another package's privacy."""
    own = rank(module)
    if own is None:
        return [f"{module}: in no layer (add its package to LAYERS)"]
    found = []
    for line, target, name in imports(source, module):
        theirs = rank(target)
        if theirs is None:
            found.append(f"{module}:{line}: imports {target}, in no layer")
        elif theirs > own:
            found.append(f"{module}:{line}: imports {target} (layer {theirs}) from layer {own}")
        parts = target.split(".")
        hidden = [i for i, part in enumerate(parts) if private(part)]
        if hidden:  # a private module: it belongs to the package that holds it
            owner = ".".join(parts[: hidden[0]])
            if owner != package_of(module):
                found.append(f"{module}:{line}: imports {target}, private to {owner}")
        elif name and private(name) and package_of(target) != package_of(module):
            found.append(f"{module}:{line}: imports {name} from {target}, private to {package_of(target)}")
    return found


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        # upward: load (4) over analysis (5), load over the lab, the proxies (3) over load
        ("mcpbench.load.samples", "from mcpbench.analysis.inspect import render", ["imports mcpbench.analysis.inspect (layer 5) from layer 4"]),
        ("mcpbench.load.cli", "def f():\n    from mcpbench.lab.experiments import sticky",
         ["imports mcpbench.lab.experiments.sticky (layer 8) from layer 4"]),
        ("mcpbench.proxies.faultplan", "import mcpbench.load.scenario", ["imports mcpbench.load.scenario (layer 4) from layer 3"]),
        ("mcpbench.lab.peers.drive", "from mcpbench.lab.topology.cluster import running_lab",
         ["imports mcpbench.lab.topology.cluster (layer 7) from layer 6"]),
        ("mcpbench.trace.reader", "from ..stdio import recorder", ["imports mcpbench.stdio.recorder (layer 3) from layer 1"]),
        ("mcpbench.newthing.x", "import os", ["mcpbench.newthing.x: in no layer"]),
        # private names of another package, on one line or several, or a private module
        ("mcpbench.lab.experiments.sticky", "from mcpbench.load.scenario import (\n    ScenarioError,\n    node_where as _w,\n    _mapping,\n)",
         ["imports _mapping from mcpbench.load.scenario, private to mcpbench.load"]),
        ("mcpbench.lab.experiments.reconnect", "from ...load.scenario import _plain", ["imports _plain from mcpbench.load.scenario, private to mcpbench.load"]),
        ("mcpbench.lab.cli", "from mcpbench.proxies import _host", ["imports _host from mcpbench.proxies, private to mcpbench.proxies"]),
        ("mcpbench.lab.cli", "import mcpbench.proxies._host.x", ["imports mcpbench.proxies._host.x, private to mcpbench.proxies"]),
        # allowed: down, sideways, a package's own private names, dunders
        ("mcpbench.lab.experiments.sticky", "from mcpbench.load.scenario import ScenarioError\nfrom mcpbench.protocol.versions import has_method", []),
        ("mcpbench.record.proxy", "from mcpbench.proxies.host import probe\nfrom mcpbench.record.addon import _Pending", []),
        ("mcpbench.cli", "def f():\n    from mcpbench.cli.pipeline import run\n    from mcpbench.lab.cli import lab", []),
        ("mcpbench.trace.writer", "from mcpbench import __version__\nfrom . import _private_here\nimport json", []),
    ],
)
def test_the_check_finds_upward_and_private_imports(module, source, expected):
    found = offences(source, module)
    assert len(found) == len(expected) and all(want in got for want, got in zip(expected, found)), found


def test_no_import_runs_up_the_layers_or_takes_another_packages_private_names():
    paths = sorted(PACKAGE.rglob("*.py"))
    assert len(paths) > 100  # the walk saw the package
    found = [offence for path in paths for offence in offences(path.read_text(), module_name(path))]
    assert found == [], "\n".join(found)


def shown_module(name: str) -> str:
    """`lab/peers/` or `cli.py` as ARCHITECTURE.md names it -> the dotted module (`__init__.py`: the package)."""
    if name == "__init__.py":
        return "mcpbench"
    return "mcpbench." + name.removesuffix("/").removesuffix(".py").replace("/", ".")


def test_architecture_shows_the_same_layers():
    """ARCHITECTURE.md's table, one row per layer (`| 3 | `stdio/`, `record/` | … |`), is LAYERS."""
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|", ARCHITECTURE.read_text(), re.MULTILINE)
    shown = {shown_module(name): int(layer) for layer, names in rows for name in re.findall(r"`([\w./]+)`", names)}
    assert shown == LAYERS


def test_every_module_path_architecture_names_exists():
    """`lab/topology/cluster.py`, `proxies/` exist from mcpbench/; a bare `plan.py` exists somewhere in it."""
    text = ARCHITECTURE.read_text()
    paths = set(re.findall(r"`((?:\w+/)*\w+\.py)`", text)) | set(re.findall(r"`((?:\w+/)+)`", text))
    assert len(paths) > 50  # the search found the module paths
    modules = {path.name for path in PACKAGE.rglob("*.py")}
    missing = sorted(path for path in paths if not (PACKAGE / path).exists() and ("/" in path or path not in modules))
    assert missing == []
