"""Recording HTTP MCP traffic through mitmproxy: the addon, the in-process runner, HAR export.

`mcpbench.record.addon` imports mitmproxy; nothing here does at import time.
"""

from pathlib import Path

ADDON_PATH = Path(__file__).resolve().with_name("addon.py")

__all__ = ["ADDON_PATH"]
