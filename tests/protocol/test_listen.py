"""`protocol/listen.py`: a `subscriptions/listen` stream read through a real `ClientConnection` (SSE bytes)."""

import orjson
import pytest

from mcpbench.protocol.client import Answered, ClientConnection, Failed, PostHead, Pushed
from mcpbench.protocol.http import Failure
from mcpbench.protocol.listen import ACK_TIMEOUT, Acknowledged, Change, Listen, listen_filter
from mcpbench.protocol.versions import LISTEN, LISTEN_ACKNOWLEDGED, META_SUBSCRIPTION_ID

URL = "http://127.0.0.1:9/mcp"


def sse(obj) -> bytes:
    return b"event: message\r\ndata: " + orjson.dumps(obj) + b"\r\n\r\n"


def note(method: str, params: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}


def tagged(method: str, subscription) -> dict:
    return note(method, {"_meta": {META_SUBSCRIPTION_ID: subscription}})


def opened(types=("toolsListChanged",), resources=()):
    conn = ClientConnection("streamable-http", "2026-07-28", url=URL)
    listen = Listen(types, resources)
    out = conn.send(conn.prepare(LISTEN, listen.params()), ts=1.0)
    listen.opened(out.request_id, 1.0)
    reader = conn.reader(PostHead(out, 200, "text/event-stream"))
    return conn, listen, out, reader


def pushed(reader, obj, ts) -> list:
    return [e for e in reader.feed(sse(obj), ts) if type(e) is Pushed]


def test_the_request_asks_for_the_types_and_carries_the_envelope():
    _, listen, out, _ = opened(("toolsListChanged", "promptsListChanged"), ("mcpbench://greeting",))
    params = out.message.params
    assert params["notifications"] == {"toolsListChanged": True, "promptsListChanged": True,
                                       "resourceSubscriptions": ["mcpbench://greeting"]}
    assert params["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert out.headers["mcp-method"] == LISTEN


def test_acknowledgement_then_tagged_changes_on_the_listen_requests_stream():
    _, listen, out, reader = opened()
    (ack,) = pushed(reader, note(LISTEN_ACKNOWLEDGED, {"notifications": {"toolsListChanged": True}}), 1.25)
    assert ack.request_id == out.request_id  # the core ties it to the listen request's stream
    assert listen.take(ack.message, 1.25) == Acknowledged({"toolsListChanged": True}, 0.25)
    (change,) = pushed(reader, tagged("notifications/tools/list_changed", out.request_id), 3.0)
    event = listen.take(change.message, 3.0)
    assert event == Change("notifications/tools/list_changed", change.message.params, True, 3.0)
    assert listen.changes == 1 and listen.counts == {"notifications/tools/list_changed": 1}


def test_notifications_of_another_subscription_or_untagged_are_counted_apart():
    _, listen, out, reader = opened()
    for obj in (tagged("notifications/tools/list_changed", "listen-other"), note("notifications/tools/list_changed")):
        (p,) = pushed(reader, obj, 2.0)
        assert listen.take(p.message) is None
    assert listen.foreign == 2 and listen.changes == 0


def test_a_change_of_a_type_not_asked_for_is_counted():
    _, listen, out, reader = opened()
    (p,) = pushed(reader, tagged("notifications/prompts/list_changed", out.request_id), 2.0)
    assert listen.take(p.message).asked is False and listen.unasked == 1


def test_a_resource_update_is_asked_for_by_resource_subscriptions():
    _, listen, out, reader = opened((), ("mcpbench://greeting",))
    (p,) = pushed(reader, tagged("notifications/resources/updated", out.request_id), 2.0)
    assert listen.take(p.message).asked is True


def test_a_stream_cut_before_its_acknowledgement_drops_the_subscription():
    conn, listen, out, reader = opened()
    (failed,) = [e for e in reader.feed(b"", 2.0) if type(e) is Failed]
    ended = listen.broke(failed.detail)
    assert ended.failure == Failure.LISTEN_DROPPED and "before its acknowledgement" in ended.detail
    assert listen.broke("again") is ended  # the first end stands


def test_the_server_ending_the_stream_with_its_result_is_a_clean_end_once_acknowledged():
    _, listen, out, reader = opened()
    listen.take(pushed(reader, note(LISTEN_ACKNOWLEDGED, {"notifications": {}}), 1.5)[0].message)
    events = reader.feed(sse({"jsonrpc": "2.0", "id": out.request_id, "result": {"resultType": "complete"}}), 4.0)
    (answered,) = [e for e in events if type(e) is Answered]
    assert listen.answered(answered.answer).failure is None


def test_a_result_without_acknowledgement_or_an_error_drops_it():
    from mcpbench.protocol.jsonrpc import ErrorResponse, Response

    assert Listen(("toolsListChanged",)).answered(Response(id=1, result={})).failure == Failure.LISTEN_DROPPED
    refused = Listen(("toolsListChanged",)).answered(ErrorResponse(id=1, code=-32601, message="Method not found"))
    assert refused.failure == Failure.LISTEN_DROPPED and "-32601" in refused.detail


def test_an_acknowledgement_that_never_comes_is_bounded_by_the_shell():
    ended = Listen(("toolsListChanged",)).unacknowledged(ACK_TIMEOUT)
    assert ended.failure == Failure.LISTEN_DROPPED and f"{ACK_TIMEOUT:g} s" in ended.detail


def test_closing_names_the_request_for_stdio_and_ends_cleanly():
    listen = Listen(("toolsListChanged",))
    listen.opened("7")
    assert listen.cancel_params()["requestId"] == "7"
    assert listen.closed().failure is None


@pytest.mark.parametrize("value, types, resources", [
    ("toolsListChanged", ("toolsListChanged",), ()),
    (["toolsListChanged", "resourcesListChanged", {"resourceSubscriptions": ["a://b"]}],
     ("toolsListChanged", "resourcesListChanged"), ("a://b",)),
])
def test_a_scenarios_listen_value(value, types, resources):
    assert listen_filter(value) == (types, resources)


@pytest.mark.parametrize("value", ["tools", [], [{"resourceSubscriptions": "a://b"}], [3]])
def test_a_wrong_listen_value_says_what_is_known(value):
    with pytest.raises(ValueError):
        listen_filter(value)


def test_an_unknown_type_is_refused():
    with pytest.raises(ValueError, match="toolsListChanged"):
        Listen(("tools",))
