"""Every rule mcpbench checks, with the transports and protocol versions it applies to.

A recorder that finds a broken rule records a `violation` whose `code` is a key of
`RULES`. Whether a check may fire on a given transport and version is decided
here, once: the checks (`session.Session`, `http.method_header_problems`, the
recorders' framing checks) ask `applies`, and no shell keeps a special case of
its own. Codes are stable and documented in docs/trace-format.md.
"""

from dataclasses import dataclass

# The transport names, as a trace's `transport` field spells them (imported from here too).
from mcpbench.protocol.transports import HTTP_TRANSPORTS, STDIO, STREAMABLE_HTTP, TRANSPORTS
from mcpbench.protocol.versions import VERSIONS, Era

ANY_TRANSPORT = frozenset(TRANSPORTS)
HTTP = frozenset(HTTP_TRANSPORTS)
ANY_VERSION = frozenset(VERSIONS)
HANDSHAKE_VERSIONS = frozenset(v for v, r in VERSIONS.items() if r.era is Era.HANDSHAKE)
STATELESS_VERSIONS = frozenset(v for v, r in VERSIONS.items() if r.era is Era.STATELESS)
MRTR_VERSIONS = frozenset(v for v, r in VERSIONS.items() if r.input_required)
TASK_VERSIONS = frozenset(v for v, r in VERSIONS.items() if r.tasks)


@dataclass(frozen=True, slots=True)
class Rule:
    """One checked rule.

    `versions` are the protocol versions it holds in; a session whose version is
    not known yet (before `initialize` is answered, say) is checked by the
    rule's own logic. `whole_session`: the check needs every message of one
    session, so a recording keyed per connection (sessionless HTTP, where one
    client's requests may use several connections) cannot make it.
    """

    code: str
    transports: frozenset[str]
    versions: frozenset[str]
    whole_session: bool = False


RULES: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        # Framing (the stdio recorder; HTTP bodies and SSE data).
        Rule("stdout-pollution", frozenset({STDIO}), ANY_VERSION),
        Rule("not-json", ANY_TRANSPORT, ANY_VERSION),
        Rule("invalid-message", ANY_TRANSPORT, ANY_VERSION),
        Rule("line-too-long", frozenset({STDIO}), ANY_VERSION),
        Rule("unterminated-line", frozenset({STDIO}), ANY_VERSION),
        Rule("empty-body", HTTP, ANY_VERSION),
        Rule("sse-truncated", HTTP, ANY_VERSION),
        Rule("sse-line-too-long", HTTP, ANY_VERSION),
        Rule("sse-undecodable", HTTP, ANY_VERSION),
        # Streamable HTTP's request headers: required in 2026-07-28, equal to the body when sent.
        # Legacy HTTP+SSE defines no such headers, in any version.
        Rule("missing-method-header", frozenset({STREAMABLE_HTTP}), frozenset(v for v, r in VERSIONS.items() if r.method_headers)),
        Rule("missing-name-header", frozenset({STREAMABLE_HTTP}), frozenset(v for v, r in VERSIONS.items() if r.method_headers)),
        Rule("method-header-mismatch", frozenset({STREAMABLE_HTTP}), ANY_VERSION),
        Rule("name-header-mismatch", frozenset({STREAMABLE_HTTP}), ANY_VERSION),
        # The session (`session.Session`), on every transport.
        Rule("duplicate-id", ANY_TRANSPORT, ANY_VERSION),
        Rule("unknown-answer", ANY_TRANSPORT, ANY_VERSION),
        Rule("notification-with-id", ANY_TRANSPORT, ANY_VERSION),
        Rule("message-after-close", ANY_TRANSPORT, ANY_VERSION),
        Rule("batch-not-allowed", ANY_TRANSPORT, frozenset(v for v, r in VERSIONS.items() if not r.batches)),
        Rule("request-before-initialized", ANY_TRANSPORT, HANDSHAKE_VERSIONS, whole_session=True),
        Rule("initialize-repeated", ANY_TRANSPORT, HANDSHAKE_VERSIONS, whole_session=True),
        Rule("unexpected-initialized", ANY_TRANSPORT, HANDSHAKE_VERSIONS, whole_session=True),
        Rule("missing-envelope", ANY_TRANSPORT, STATELESS_VERSIONS),
        Rule("server-request-forbidden", ANY_TRANSPORT, STATELESS_VERSIONS),
        # Multi round-trip requests (2026-07-28, SEP-2322), checked by the trace model
        # (`trace/model.py`) on the operations it links, not by the recorders.
        Rule("mrtr-state-changed", ANY_TRANSPORT, MRTR_VERSIONS),
        Rule("mrtr-id-reused", ANY_TRANSPORT, MRTR_VERSIONS),
        Rule("mrtr-keys-mismatch", ANY_TRANSPORT, MRTR_VERSIONS),
        Rule("mrtr-state-shared", ANY_TRANSPORT, MRTR_VERSIONS),
        Rule("input-required-method", ANY_TRANSPORT, MRTR_VERSIONS),
        Rule("input-capability-missing", ANY_TRANSPORT, MRTR_VERSIONS),
        Rule("missing-result-type", ANY_TRANSPORT, MRTR_VERSIONS),
        Rule("log-not-requested", ANY_TRANSPORT, MRTR_VERSIONS),
        # Tasks (both forms), checked by the trace model on the operation that became the task.
        Rule("task-unknown", ANY_TRANSPORT, TASK_VERSIONS),
        Rule("task-status-regressed", ANY_TRANSPORT, TASK_VERSIONS),
        Rule("task-result-early", ANY_TRANSPORT, TASK_VERSIONS),
    )
}


def applies(code: str, transport: str | None, version: str | None) -> bool:
    """Whether the rule `code` holds on `transport` in protocol `version`.

    An unknown transport or version (None, or one mcpbench does not know)
    narrows nothing: the check's own logic decides. A code not in `RULES` is a
    bug in the caller and raises KeyError.
    """
    rule = RULES[code]
    if transport is not None and transport not in rule.transports:
        return False
    return version not in VERSIONS or version in rule.versions


def whole_session_codes() -> frozenset[str]:
    """The codes a recording keyed per connection cannot check (see `Rule.whole_session`)."""
    return frozenset(code for code, rule in RULES.items() if rule.whole_session)
