"""Recording HTTP MCP traffic through mitmproxy: the addon, the in-process runner, HAR export.

`mcpbench.record.addon` imports mitmproxy; nothing here does at import time.
"""

from pathlib import Path

ADDON_PATH = Path(__file__).resolve().with_name("addon.py")
# Seconds an upstream may take to begin its answer before its client gets a 504 (record/timeout.py).
# A recorder must not cut a session its client would have waited for: a JSON-answer server sends
# its headers only with a tool's result, and clients' own read timeouts run to minutes (the Python
# SDK's SSE read timeout is 300 s). A hung upstream is still named, not waited out for ever.
DEFAULT_UPSTREAM_TIMEOUT = 300

__all__ = ["ADDON_PATH", "DEFAULT_UPSTREAM_TIMEOUT"]
