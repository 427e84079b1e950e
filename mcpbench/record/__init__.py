"""Recording HTTP MCP traffic through mitmproxy: the addon, the in-process runner, HAR export.

`mcpbench.record.addon` imports mitmproxy; nothing here does at import time.
"""

from pathlib import Path

ADDON_PATH = Path(__file__).resolve().with_name("addon.py")
# Seconds an upstream may take to begin its answer before its client gets a 504 (record/timeout.py):
# long enough for a slow tool call, short enough that a hung upstream is named, not waited out.
DEFAULT_UPSTREAM_TIMEOUT = 30

__all__ = ["ADDON_PATH", "DEFAULT_UPSTREAM_TIMEOUT"]
