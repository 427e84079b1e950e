import pytest

from mcpbench.protocol.client import STDOUT, ClientConnection, initialize_request, initialized_notification
from mcpbench.protocol.jsonrpc import Batch, ErrorResponse, Notification, Request, Response
from mcpbench.protocol.session import (
    C2S,
    LOSSES,
    Direction,
    S2C,
    TRANSITIONS,
    Ending,
    Exchange,
    Session,
    SessionState,
    StateChange,
    Trigger,
    Violation,
)
from mcpbench.protocol.versions import Era, envelope

INIT = Request(id=1, method="initialize", params={"protocolVersion": "2025-11-25", "capabilities": {}})
INIT_OK = Response(id=1, result={"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "s"}})
INITIALIZED = Notification(method="notifications/initialized")


def modern(id_, method, **params):
    return Request(id=id_, method=method, params={**params, "_meta": envelope("2026-07-28")})


def run(session, steps):
    out = []
    for ts, (direction, message) in enumerate(steps):
        out += session.observe(direction, message, float(ts))
    return out


def codes(events):
    return [e.code for e in events if isinstance(e, Violation)]


def test_handshake_lifecycle_and_pairing():
    session = Session()
    events = run(session, [(C2S, INIT), (S2C, INIT_OK), (C2S, INITIALIZED),
                           (C2S, Request(id=2, method="tools/list")), (S2C, Response(id=2, result={"tools": []}))])
    changes = [(e.old, e.new) for e in events if isinstance(e, StateChange)]
    assert changes == [(SessionState.NEW, SessionState.INITIALIZING), (SessionState.INITIALIZING, SessionState.INITIALIZED),
                       (SessionState.INITIALIZED, SessionState.OPERATING)]
    exchanges = [e for e in events if isinstance(e, Exchange)]
    assert [(x.request.method, x.latency) for x in exchanges] == [("initialize", 1.0), ("tools/list", 1.0)]
    assert session.version == "2025-06-18"  # the server's answer decides
    assert session.handshake_time == 2.0
    assert codes(events) == [] and not session.pending


def test_stateless_era_from_envelope():
    session = Session()
    events = run(session, [(C2S, modern(1, "server/discover")), (S2C, Response(id=1, result={"capabilities": {}})),
                           (C2S, modern(2, "tools/call", name="echo")), (S2C, Response(id=2, result={}))])
    assert session.era is Era.STATELESS and session.state is SessionState.OPERATING
    assert codes(events) == []


def test_auto_client_probe_then_fallback_to_handshake():
    session = Session()
    events = run(session, [(C2S, modern(1, "server/discover")), (S2C, ErrorResponse(id=1, code=-32601, message="no")),
                           (C2S, Request(id=2, method="initialize", params={"protocolVersion": "2025-11-25"}))])
    assert session.version is None  # the probe's 2026-07-28 is not the session's: the handshake settles it
    events += run(session, [(S2C, Response(id=2, result={"protocolVersion": "2025-11-25"})), (C2S, INITIALIZED)])
    assert session.era is Era.HANDSHAKE and session.state is SessionState.OPERATING and session.version == "2025-11-25"
    assert codes(events) == []


VIOLATIONS = [
    ("request before initialization", [(C2S, Request(id=5, method="tools/list"))], ["request-before-initialized"]),
    ("server request before initialized", [(C2S, INIT), (S2C, Request(id=9, method="sampling/createMessage"))], ["request-before-initialized"]),
    ("notification carrying an id", [(C2S, Request(id=1, method="notifications/initialized"))], ["notification-with-id"]),
    ("answer to an unknown id", [(S2C, Response(id=42, result={}))], ["unknown-answer"]),
    ("duplicate id in flight", [(C2S, INIT), (C2S, Request(id=1, method="ping"))], ["duplicate-id"]),
    ("second initialize", [(C2S, INIT), (S2C, INIT_OK), (C2S, INITIALIZED), (C2S, Request(id=3, method="initialize", params={}))], ["initialize-repeated"]),
    ("initialized without initialize", [(C2S, INITIALIZED)], ["unexpected-initialized"]),
    ("batch where the version has none",
     [(C2S, INIT), (S2C, INIT_OK), (C2S, INITIALIZED), (C2S, Batch(items=(Request(id=2, method="ping"),)))], ["batch-not-allowed"]),
    ("server request in 2026-07-28", [(C2S, modern(1, "tools/call", name="ask")), (S2C, Request(id=7, method="sampling/createMessage"))],
     ["server-request-forbidden"]),
    ("stateless request without envelope", [(C2S, modern(1, "tools/list")), (C2S, Request(id=2, method="tools/list"))], ["missing-envelope"]),
]


@pytest.mark.parametrize("name,steps,expected", VIOLATIONS, ids=[v[0] for v in VIOLATIONS])
def test_violations(name, steps, expected):
    assert codes(run(Session(), steps)) == expected


def test_batch_allowed_in_2025_03_26():
    session = Session()
    ok = Response(id=1, result={"protocolVersion": "2025-03-26"})
    events = run(session, [(C2S, INIT), (S2C, ok), (C2S, INITIALIZED),
                           (C2S, Batch(items=(Request(id=2, method="ping"), Request(id=3, method="ping")))),
                           (S2C, Batch(items=(Response(id=3, result={}), Response(id=2, result={}))))])
    assert codes(events) == []
    assert len([e for e in events if isinstance(e, Exchange)]) == 3


def test_handshake_time_only_from_a_completed_handshake():
    session = Session()
    run(session, [(C2S, INIT), (C2S, INITIALIZED)])  # initialized before the answer: no handshake yet
    assert session.handshake_time is None
    session.observe(S2C, INIT_OK, 5.0)
    session.observe(C2S, INITIALIZED, 7.0)
    assert session.handshake_time == 7.0 and session.state is SessionState.OPERATING


def test_initialize_error_returns_to_new():
    session = Session()
    run(session, [(C2S, INIT), (S2C, ErrorResponse(id=1, code=-32602, message="bad version"))])
    assert session.state is SessionState.NEW


def test_a_session_joined_mid_way_is_operating():
    call = Request(id=7, method="tools/call", params={"name": "echo"})
    steps = [(C2S, call), (S2C, Response(id=7, result={}))]
    assert codes(run(Session(), steps)) == ["request-before-initialized"]
    joined = Session.joined("2025-06-18")
    assert codes(run(joined, steps)) == [] and joined.era is Era.HANDSHAKE and joined.version == "2025-06-18"
    assert Session.joined().state is SessionState.OPERATING


def test_close_and_message_after_close():
    session = Session()
    run(session, [(C2S, INIT), (S2C, INIT_OK), (C2S, INITIALIZED)])
    assert [e.new for e in session.close()] == [SessionState.CLOSED]
    assert codes(session.observe(C2S, Request(id=9, method="ping"))) == ["message-after-close"]


def test_every_table_row_is_reachable():
    """Each (era, state, trigger) row of TRANSITIONS leads to a state of that era's table."""
    for era, table in TRANSITIONS.items():
        for state, rows in table.items():
            for trigger, new in rows.items():
                assert new in table, (era, state, trigger)


def test_the_client_core_drives_the_session_in_both_eras():
    old = ClientConnection("stdio", "2025-11-25")
    init = old.send(initialize_request(old))
    assert init.message.params["protocolVersion"] == "2025-11-25" and init.request_id == 1
    old.reader(STDOUT).feed(b'{"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25"}}\n')
    old.send(initialized_notification())
    assert old.session.state is SessionState.OPERATING
    new = ClientConnection("stdio", "2026-07-28")
    out = new.send(new.prepare("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
    assert out.message.params["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert new.session.state is SessionState.OPERATING


def test_operating_session_ignores_a_later_envelope_and_pairs_both_ways():
    # The shortcuts of the hot path (the envelope read only while it can matter, the
    # answer's asking direction, identity-hashed directions) change no outcome.
    session = Session()
    run(session, [(C2S, INIT), (S2C, INIT_OK), (C2S, INITIALIZED)])
    assert session.observe(C2S, modern(5, "tools/list"), 10.0) == []
    assert session.era is Era.HANDSHAKE and session.state is SessionState.OPERATING and session.version == "2025-06-18"
    assert session.observe(S2C, Request(id="ask", method="sampling/createMessage"), 11.0) == []
    assert (Direction("s2c"), "ask") in session.pending and (S2C, 5) not in session.pending
    [answered] = session.observe(C2S, Response(id="ask", result={}), 12.0)
    assert type(answered) is Exchange and answered.direction is S2C and answered.latency == 1.0
    [listed] = session.observe(S2C, Response(id=5, result={"tools": []}), 13.0)
    assert listed.direction is C2S and listed.request.method == "tools/list" and listed.latency == 3.0
    assert codes(session.observe(C2S, Response(id=5, result={}), 14.0)) == ["unknown-answer"]
    assert not session.pending


def test_envelope_still_read_in_a_stateless_session():
    session = Session()
    run(session, [(C2S, modern(1, "tools/list")), (S2C, Response(id=1, result={}))])
    assert codes(session.observe(C2S, Request(id=2, method="tools/list", params={"_meta": {}}), 3.0)) == ["missing-envelope"]
    assert session.observe(C2S, modern(3, "tools/list"), 4.0) == []


def test_a_lone_violation_is_still_filtered_by_its_rule():
    # 2026-07-28 has no handshake: initialize-era rules do not hold there, even alone in `out`.
    session = Session(version="2026-07-28")
    assert session.observe(C2S, INITIALIZED, 0.0) == []
    assert codes(Session().observe(C2S, INITIALIZED, 0.0)) == ["unexpected-initialized"]


# --- every row of the table, through the public API ----------------------------------------------

STATELESS_VERSION = "2026-07-28"


def reach(era, state):
    """A session of `era` in `state`, got there by messages and calls as a client or observer would."""
    session = Session(STATELESS_VERSION if era is Era.STATELESS else None)
    steps = {
        Era.HANDSHAKE: {SessionState.INITIALIZING: [(C2S, INIT)], SessionState.INITIALIZED: [(C2S, INIT), (S2C, INIT_OK)],
                        SessionState.OPERATING: [(C2S, INIT), (S2C, INIT_OK), (C2S, INITIALIZED)]},
        Era.STATELESS: {SessionState.OPERATING: [(C2S, modern(1, "tools/list"))]},
    }[era]
    if state in (SessionState.LOST, SessionState.CLOSED):
        run(session, steps[SessionState.OPERATING])
        session.lose(Trigger.SESSION_NOT_FOUND, "404") if state is SessionState.LOST else session.close()
    else:
        run(session, steps.get(state, []))
    assert session.state is state
    return session


def fire(session, era, trigger):
    """`trigger` as the public API makes it; the session it leaves (JOIN makes one)."""
    messages = {
        Trigger.INITIALIZE: (C2S, INIT),
        Trigger.INITIALIZE_RESULT: (S2C, INIT_OK),
        Trigger.INITIALIZE_ERROR: (S2C, ErrorResponse(id=1, code=-32602, message="bad version")),
        Trigger.INITIALIZED: (C2S, INITIALIZED),
        Trigger.ENVELOPE_REQUEST: (C2S, modern(2, "tools/list")),
    }
    if trigger in messages:
        session.observe(*messages[trigger])
    elif trigger is Trigger.JOIN:
        return Session.joined(STATELESS_VERSION if era is Era.STATELESS else None)
    elif trigger is Trigger.RESUME:
        session.resuming(Request(id=9, method="tools/call", params={"name": "slow"}), 1.0, "waiter")
    elif trigger is Trigger.CLOSE:
        session.close("closed by the client")
    else:
        session.lose(trigger, f"lost: {trigger.value}")
    return session


ROWS = [(era, state, trigger, new) for era, table in TRANSITIONS.items() for state, rows in table.items()
        for trigger, new in rows.items()]


@pytest.mark.parametrize("era,state,trigger,new", ROWS, ids=[f"{e.value}-{s.value}-{t.name}" for e, s, t, _ in ROWS])
def test_every_row_of_the_table(era, state, trigger, new):
    session = fire(reach(era, state), era, trigger)
    assert session.state is new and (session.era or Era.HANDSHAKE) is era  # no era yet reads as the handshake's
    if new is SessionState.LOST and state is not SessionState.LOST:
        assert session.ending == Ending(trigger, f"lost: {trigger.value}")
    if trigger is Trigger.RESUME:
        assert session.pending[(C2S, 9)].waiter == "waiter" and session.pending[(C2S, 9)].started == 1.0


ENDS = [*LOSSES, Trigger.CLOSE, Trigger.RESUME]


@pytest.mark.parametrize("era", list(Era))
@pytest.mark.parametrize("trigger", ENDS, ids=[t.name for t in ENDS])
def test_an_ended_session_stays_as_it_ended(era, trigger):
    """Rows absent from the table: a lost session keeps its first cause (closing it keeps the cause too), and
    neither a lost nor a closed one resumes."""
    for state in (SessionState.LOST, SessionState.CLOSED):
        session = reach(era, state)
        first = session.ending
        fire(session, era, trigger)
        assert session.state is (SessionState.CLOSED if trigger is Trigger.CLOSE else state)
        assert session.ending == first and (C2S, 9) not in session.pending
