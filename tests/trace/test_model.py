"""The trace model (`trace/model.py`): 2026-07-28 multi round-trip requests as one operation, and
each of their rules broken once and kept once, on doctored traces (tests/support/traces.py)."""

from mcpbench.trace.model import MRTR_AMBIGUOUS, MRTR_UNLINKED, Rebuild, SessionReport
from mcpbench.trace.reader import TraceReader
from tests.support.traces import ELICIT, answered, asks, done, request, write_trace


def model(tmp_path, *events: dict) -> SessionReport:
    rebuild = Rebuild()
    for event in TraceReader(write_trace(tmp_path / "t.jsonl", list(events))):
        rebuild.take(event)
    rebuild.finish()
    (session,) = rebuild.sessions.values()
    return session


def codes(session: SessionReport, kind: str = "violation") -> list[str]:
    return [entry.name for entry in session.entries if entry.kind == kind]


def test_rounds_linked_by_keys_are_one_operation_with_the_clients_wait_apart(tmp_path):
    session = model(tmp_path, request(2.0, 1), asks(2.1, 1), request(5.1, 2, responses=answered()), done(5.3, 2))
    (op,) = session.operations
    assert [r.id for r in op.rounds] == [1, 2] and op.outcome == "ok"
    assert round(op.latency, 6) == 3.3 and round(op.client_wait, 6) == 3.0 and round(op.server_time, 6) == 0.3
    assert codes(session) == [] and codes(session, "warning") == []


def test_parallel_rounds_follow_their_exact_request_state(tmp_path):
    session = model(tmp_path, request(1.0, 1), request(1.0, 2), asks(1.1, 1, state="A"), asks(1.1, 2, state="B"),
                    request(1.2, 3, responses=answered(), state="B"), request(1.2, 4, responses=answered(), state="A"),
                    done(1.3, 3), done(1.4, 4))
    first, second = session.operations
    assert [r.id for r in first.rounds] == [1, 4] and [r.id for r in second.rounds] == [2, 3]
    assert codes(session) == []


def test_two_waiting_operations_that_fit_one_retry_link_none_and_say_so(tmp_path):
    session = model(tmp_path, request(1.0, 1), request(1.0, 2), asks(1.1, 1), asks(1.1, 2),
                    request(1.2, 3, responses=answered()), done(1.3, 3))
    assert [len(op.rounds) for op in session.operations] == [1, 1, 1]
    assert codes(session, "warning") == [MRTR_AMBIGUOUS]
    # never guessed: both first operations stay asking for input, the retry is an operation of its own
    assert [op.outcome for op in session.operations] == ["input-required", "input-required", "ok"]


def test_a_retry_nothing_asked_for_is_unlinked_and_an_unfinished_round_stays_open(tmp_path):
    session = model(tmp_path, request(1.0, 1, responses=answered()), done(1.1, 1), request(2.0, 2), asks(2.1, 2),
                    request(2.2, 3, responses=answered()))
    assert codes(session, "warning") == [MRTR_UNLINKED]
    unlinked, unfinished = session.operations
    assert len(unlinked.rounds) == 1 and unfinished.outcome == "unanswered" and len(unfinished.rounds) == 2
    assert unfinished.latency is None


def test_request_state_changed_dropped_or_invented(tmp_path):
    changed = model(tmp_path, request(1.0, 1), asks(1.1, 1, state="A"), request(1.2, 2, responses=answered(), state="B"), done(1.3, 2))
    dropped = model(tmp_path, request(1.0, 1), asks(1.1, 1, state="A"), request(1.2, 2, responses=answered()), done(1.3, 2))
    invented = model(tmp_path, request(1.0, 1), asks(1.1, 1), request(1.2, 2, responses=answered(), state="X"), done(1.3, 2))
    kept = model(tmp_path, request(1.0, 1), asks(1.1, 1, state="A"), request(1.2, 2, responses=answered(), state="A"), done(1.3, 2))
    for session, word in ((changed, "changes"), (dropped, "drops"), (invented, "invents")):
        assert codes(session) == ["mrtr-state-changed"], word
        assert word in next(e.detail for e in session.entries if e.kind == "violation")
        assert len(session.operations) == 1  # linked all the same: method, name and keys fit
    assert codes(kept) == [] and len(kept.operations[0].rounds) == 2


def test_a_retry_reusing_an_id(tmp_path):
    broken = model(tmp_path, request(1.0, 1), asks(1.1, 1), request(1.2, 1, responses=answered()), done(1.3, 1))
    kept = model(tmp_path, request(1.0, 1), asks(1.1, 1), request(1.2, 2, responses=answered()), done(1.3, 2))
    assert codes(broken) == ["mrtr-id-reused"] and codes(kept) == []


def test_input_responses_keys_must_be_the_input_requests_keys(tmp_path):
    broken = model(tmp_path, request(1.0, 1), asks(1.1, 1), request(1.2, 2, responses=answered("other")), done(1.3, 2))
    kept = model(tmp_path, request(1.0, 1), asks(1.1, 1), request(1.2, 2, responses=answered("ask")), done(1.3, 2))
    assert codes(broken) == ["mrtr-keys-mismatch"] and len(broken.operations) == 1
    assert codes(kept) == []


def test_one_state_carried_by_two_requests_at_once(tmp_path):
    broken = model(tmp_path, request(1.0, 1), asks(1.1, 1, state="A"), request(1.2, 2, responses=answered(), state="A"),
                   request(1.2, 3, responses=answered(), state="A"), done(1.3, 2), done(1.3, 3))
    kept = model(tmp_path, request(1.0, 1), asks(1.1, 1, state="A"), request(1.2, 2, responses=answered(), state="A"),
                 asks(1.3, 2, state="B"), request(1.4, 3, responses=answered(), state="B"), done(1.5, 3))
    assert "mrtr-state-shared" in codes(broken)
    assert codes(kept) == [] and len(kept.operations[0].rounds) == 3


def test_input_required_only_from_the_three_methods(tmp_path):
    broken = model(tmp_path, request(1.0, 1, method="tools/list"), asks(1.1, 1))
    kept = model(tmp_path, request(1.0, 1, method="resources/read", name="file:///a"), asks(1.1, 1),
                 request(1.2, 2, method="resources/read", name="file:///a", responses=answered()), done(1.3, 2))
    assert codes(broken) == ["input-required-method"]
    assert codes(kept) == [] and kept.operations[0].name == "resources/read file:///a"


def test_input_asked_for_a_capability_the_client_did_not_declare(tmp_path):
    broken = model(tmp_path, request(1.0, 1, capabilities={"sampling": {}}), asks(1.1, 1, inputs={"name": ELICIT}))
    kept = model(tmp_path, request(1.0, 1, capabilities={"elicitation": {}}), asks(1.1, 1, inputs={"name": ELICIT}))
    assert codes(broken) == ["input-capability-missing"] and "elicitation" in broken.entries[-1].detail
    assert codes(kept) == []


def test_a_2026_result_without_result_type(tmp_path):
    broken = model(tmp_path, request(1.0, 1, name="echo"), done(1.1, 1, result_type=False))
    kept = model(tmp_path, request(1.0, 1, name="echo"), done(1.1, 1))
    assert codes(broken) == ["missing-result-type"] and codes(kept) == []
