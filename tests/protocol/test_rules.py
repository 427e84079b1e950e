"""The rule table: every recorded violation code names the transports and versions it holds in."""

import re
from pathlib import Path

from mcpbench.protocol.http import method_header_problems
from mcpbench.protocol.jsonrpc import Batch, Notification, Request
from mcpbench.protocol.rules import RULES, applies
from mcpbench.protocol.session import C2S, Session, Violation
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP

DOCS = Path(__file__).parents[2] / "docs"
SOURCES = Path(__file__).parents[2] / "mcpbench"


def test_every_documented_and_emitted_code_is_in_the_table():
    documented = set()
    for name, heading in (("trace-format.md", "## Violation codes"), ("trace-format-http.md", "### `violation`")):
        section = (DOCS / name).read_text().split(heading, 1)[1].split("\n#", 1)[0]
        for row in re.findall(r"^\| (`[a-z-]+`(?:, `[a-z-]+`)*) \|", section, re.M):
            documented |= set(re.findall(r"`([a-z-]+)`", row))
    assert documented == set(RULES)
    # Every code literal a check emits (Violation("code", …), ("code", detail) problems) is a rule.
    emitted = set()
    for path in SOURCES.rglob("*.py"):
        emitted |= set(re.findall(r'(?:Violation\(|_violation\([^"]*|problems\.append\(\(|code = )"([a-z]+(?:-[a-z]+)+)"', path.read_text()))
    assert emitted and emitted <= set(RULES), emitted - set(RULES)


def test_streamable_http_header_rules_do_not_hold_on_legacy_sse():
    call = Request(id=1, method="tools/call", params={"name": "echo"})
    assert [c for c, _ in method_header_problems(call, {}, version="2026-07-28", transport=STREAMABLE_HTTP)] == [
        "missing-method-header", "missing-name-header"
    ]
    assert method_header_problems(call, {}, version="2026-07-28", transport=LEGACY_SSE) == []
    assert method_header_problems(call, {"mcp-method": "x"}, version="2026-07-28", transport=LEGACY_SSE) == []
    assert not applies("missing-method-header", LEGACY_SSE, "2026-07-28")
    assert not applies("missing-method-header", STREAMABLE_HTTP, "2025-11-25")
    assert not applies("stdout-pollution", STREAMABLE_HTTP, None)
    assert applies("duplicate-id", STDIO, "2024-11-05") and applies("duplicate-id", None, "1999-01-01")


def test_session_reports_only_rules_that_hold_in_its_version():
    batch = Batch(items=(Request(id=1, method="ping"),))
    # 2025-03-26 allows batches; 2025-06-18 does not.
    allowed, forbidden = Session(version="2025-03-26", transport=STDIO), Session(version="2025-06-18", transport=STDIO)
    assert not [e for e in allowed.observe(C2S, batch) if isinstance(e, Violation)]
    assert [e.code for e in forbidden.observe(C2S, batch) if isinstance(e, Violation)] == ["batch-not-allowed"]
    session = Session(transport=STDIO)
    assert [e.code for e in session.observe(C2S, Notification(method="notifications/initialized")) if isinstance(e, Violation)] == [
        "unexpected-initialized"
    ]
