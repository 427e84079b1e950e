"""A client's ledger against a trace: what counts as lost, duplicated, unreceived or unfinished."""

from collections import Counter

from mcpbench.bench import ledger
from mcpbench.protocol.jsonrpc import ErrorResponse, Notification, Request, Response, to_obj
from tests.support.traces import event

CALL = Request(id=1, method="tools/call", params={"name": "echo", "arguments": {"text": "a"}})
ANSWER = Response(id=1, result={"content": [{"type": "text", "text": "a"}]})
PROGRESS = Notification(method="notifications/progress", params={"progressToken": "t", "progress": 1})


def recorded(direction, message, session="s1"):
    return event(1.0, session, direction, to_obj(message))


def client_counts(*entries, session="s1"):
    book = ledger.MessageLedger()

    class Conn:
        session_id = session

    conn = Conn()
    for direction, message in entries:
        book.on_message(direction, message, conn)
    return ledger.merge(book.sessions())


def test_a_trace_holding_what_the_client_saw_has_nothing_lost_or_duplicated():
    client = client_counts(("c2s", CALL), ("s2c", PROGRESS), ("s2c", ANSWER))
    trace = ledger.trace_counts([recorded("c2s", CALL), recorded("s2c", PROGRESS), recorded("s2c", ANSWER)])
    result = ledger.reconcile(client, trace)
    assert result["client"]["total"] == result["trace"]["total"] == 3
    assert result["lost"]["total"] == result["duplicated"]["total"] == result["unreceived"]["total"] == 0


def test_missing_extra_and_unreceived_messages_are_told_apart():
    client = client_counts(("c2s", CALL), ("s2c", PROGRESS), ("s2c", PROGRESS))
    # The trace lacks one of the two progress deliveries, holds the call twice, and holds an answer
    # that never reached the client (a cut after the proxy wrote it).
    trace = ledger.trace_counts([recorded("c2s", CALL), recorded("c2s", CALL), recorded("s2c", PROGRESS), recorded("s2c", ANSWER)])
    result = ledger.reconcile(client, trace)
    assert (result["lost"]["s2c"], result["duplicated"]["c2s"], result["unreceived"]["s2c"]) == (1, 1, 1)
    assert result["examples"]["lost"] == [["s1", "s2c", ledger.digest(PROGRESS)]]


def test_the_same_message_in_another_session_is_not_this_ones():
    client = client_counts(("c2s", CALL), session="s1")
    trace = ledger.trace_counts([recorded("c2s", CALL, session="s2")])
    result = ledger.reconcile(client, trace)
    assert (result["lost"]["total"], result["unreceived"]["total"]) == (1, 1)


def test_an_unfinished_send_may_or_may_not_be_in_the_trace_but_not_twice():
    client = client_counts((ledger.UNFINISHED, CALL))
    assert ledger.reconcile(client, ledger.trace_counts([]))["lost"]["total"] == 0
    once = ledger.reconcile(client, ledger.trace_counts([recorded("c2s", CALL)]))
    assert (once["lost"]["total"], once["duplicated"]["total"], once["unreceived"]["total"], once["unfinished"]["total"]) == (0, 0, 0, 1)
    twice = ledger.reconcile(client, ledger.trace_counts([recorded("c2s", CALL)] * 2))
    assert twice["duplicated"]["total"] == 1


def test_sessionless_trace_keys_pool_with_a_client_session_that_got_no_id():
    client = client_counts(("c2s", CALL), session=None)
    trace = ledger.trace_counts([recorded("c2s", CALL, session="conn-0123456789ab")])
    assert ledger.reconcile(client, trace)["lost"]["total"] == 0


def test_a_digest_does_not_depend_on_key_order():
    reordered = Request(id=1, method="tools/call", params={"arguments": {"text": "a"}, "name": "echo"})
    assert ledger.digest(reordered) == ledger.digest(CALL)
    assert ledger.digest(ANSWER) != ledger.digest(CALL)
    assert Counter(ledger.trace_counts([recorded("c2s", CALL)])["s1"]["c2s"]) == Counter({ledger.digest(CALL): 1})


def test_an_error_with_a_null_id_counts_as_the_answer_to_its_exchanges_request():
    """The client core hands such an error to the client with the id of the request it answers."""
    unread = ErrorResponse(id=None, code=-32600, message="Bad Request")
    client = client_counts(("c2s", CALL), ("s2c", ErrorResponse(id=1, code=-32600, message="Bad Request")))
    flow = {"flow": "f1"}
    trace = ledger.trace_counts([recorded("c2s", CALL) | flow, recorded("s2c", unread) | flow])
    result = ledger.reconcile(client, trace)
    assert (result["lost"]["total"], result["duplicated"]["total"]) == (0, 0)
