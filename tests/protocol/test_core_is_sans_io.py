"""The protocol core never imports I/O, clock or network-level modules (style.md: protocol/ is sans-IO)."""

import ast
from pathlib import Path

import mcpbench.protocol

# Sockets and what waits on them, clocks and threads, the standard library's HTTP and URL packages
# (protocol/uri.py does what the core needs of URLs), and the I/O frameworks mcpbench drives.
FORBIDDEN = {
    "socket", "ssl", "select", "selectors", "threading", "time", "http", "urllib", "asyncio", "subprocess",
    "gevent", "httpx", "httpx2", "mitmproxy", "locust", "mcp", "anyio",
}


def test_protocol_imports_no_io():
    folder = Path(mcpbench.protocol.__file__).parent
    offenders = []
    for path in folder.rglob("*.py"):  # subpackages too
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:  # relative: protocol's own
                names = [node.module]
            offenders += [f"{path.relative_to(folder)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []
    assert len(list(folder.rglob("*.py"))) >= 8  # the walk really saw the modules


def test_public_names_are_exported():
    for name in mcpbench.protocol.__all__:
        assert hasattr(mcpbench.protocol, name), name
