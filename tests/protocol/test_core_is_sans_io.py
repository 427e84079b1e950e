"""The protocol core never imports I/O libraries (style.md: protocol/ is sans-IO)."""

import ast
from pathlib import Path

import mcpbench.protocol

FORBIDDEN = {"socket", "asyncio", "gevent", "httpx", "httpx2", "mitmproxy", "locust", "subprocess", "threading", "selectors", "mcp", "anyio"}


def test_protocol_imports_no_io():
    folder = Path(mcpbench.protocol.__file__).parent
    offenders = []
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []
    assert len(list(folder.glob("*.py"))) >= 8  # the walk really saw the modules


def test_public_names_are_exported():
    for name in mcpbench.protocol.__all__:
        assert hasattr(mcpbench.protocol, name), name
