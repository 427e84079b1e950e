"""Reading the answer to a POST: every form Streamable HTTP allows, however the body is cut."""

import gzip

import pytest

from mcpbench.protocol.http import Carried, EndpointUrl, Failure, LegacyStream, PostAnswer, Problem, stream_decoder
from mcpbench.protocol.jsonrpc import ErrorResponse, Notification, Request, Response

SSE = (
    b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\r\n\r\n"
    b": keep-alive\r\n\r\n"
    b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"sampling/createMessage\",\"params\":{}}\r\n\r\n"
    b"event: other\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"wrong\":true}}\r\n\r\n"
    b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"ok\":true}}\r\n\r\n"
)


def read(answer: PostAnswer, body: bytes, step: int) -> list:
    items = []
    for start in range(0, len(body), step):
        items += answer.feed(body[start : start + step])
    return items + answer.feed(b"")


@pytest.mark.parametrize("step", [1, 7, len(SSE)])
def test_an_sse_answer_with_what_comes_before_it(step):
    answer = PostAnswer(7, 200, "text/event-stream", has_session=True)
    items = read(answer, SSE, step)
    kinds = [type(item.message) for item in items]
    assert kinds == [Notification, Request, Response]  # an event not of type "message" carries nothing
    assert all(type(item) is Carried and item.via == "sse" for item in items)
    assert answer.answer == Response(id=7, result={"ok": True}) and answer.failure is None
    assert answer.events == 4 and answer.size == len(SSE)


def test_a_stream_that_ends_without_the_answer_or_inside_an_event():
    answer = PostAnswer(7, 200, "text/event-stream", has_session=False)
    items = read(answer, SSE[:40], 40)
    assert [(item.failure, item.detail) for item in items] == [
        (Failure.STREAM_CLOSED, "the answer stream ended inside an SSE event"),
        (Failure.STREAM_CLOSED, "the answer stream closed without an answer"),
    ]


def test_json_answers_batches_and_a_notifications_202():
    answer = PostAnswer(3, 200, "application/json", has_session=True)
    items = read(answer, b'[{"jsonrpc":"2.0","id":3,"result":{}},{"jsonrpc":"2.0","method":"n"}]', 5)
    assert [type(item.message) for item in items] == [Response, Notification] and items[0].via == "json"
    assert answer.answer == Response(id=3, result={})
    assert read(PostAnswer(None, 202, None, has_session=True), b"", 1) == []


@pytest.mark.parametrize(
    ("status", "has_session", "body", "expected"),
    [
        (404, True, b"Session not found", Problem(Failure.SESSION_NOT_FOUND, "HTTP 404: Session not found")),
        (404, False, b"", Problem(Failure.HTTP_4XX, "HTTP 404")),
        (503, True, b"<html>\nbusy</html>", Problem(Failure.HTTP_5XX, "HTTP 503: <html> busy</html>")),
        (200, True, b"", Problem(Failure.ANSWER_LOST, "HTTP 200 without an answer")),
        (200, True, b"{not json", Problem(Failure.JSONRPC_ERROR, "the server sent an invalid message (not JSON")),
    ],
)
def test_what_goes_wrong_is_one_problem(status, has_session, body, expected):
    answer = PostAnswer(1, status, "text/plain" if body[:1] != b"{" else "application/json", has_session=has_session)
    (problem,) = read(answer, body, 3)
    assert type(problem) is Problem and problem.failure == expected.failure and problem.detail.startswith(expected.detail)
    assert answer.answer is None


def test_an_error_about_an_unreadable_request_is_its_answer_and_the_status_still_counts():
    answer = PostAnswer(5, 400, "application/json", has_session=False)
    items = read(answer, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}}', 9)
    assert [item.message for item in items] == [ErrorResponse(id=5, code=-32600, message="bad")]
    assert answer.answer == ErrorResponse(id=5, code=-32600, message="bad") and answer.failure == Failure.HTTP_4XX


SERVER_ERROR = b'{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Bad Request: Missing session ID"}}'


def test_an_sdk1_refusal_under_a_foreign_id_is_the_posts_answer_and_says_its_id():
    answer = PostAnswer(3, 400, "application/json", has_session=False)  # SDK 1.x: id "server-error"
    (carried,) = read(answer, SERVER_ERROR, 7)
    assert carried.message == ErrorResponse(id=3, code=-32600, message="Bad Request: Missing session ID")
    assert answer.answer == carried.message and answer.foreign_id == "server-error" and answer.failure == Failure.HTTP_4XX


def test_a_foreign_id_on_a_success_status_pairs_with_nothing():
    answer = PostAnswer(3, 200, "application/json", has_session=True)
    items = read(answer, SERVER_ERROR, 7)
    assert items[0].message.id == "server-error" and answer.answer is None and answer.foreign_id is None


@pytest.mark.parametrize("step", [1, 5, 64])
def test_a_gzip_stream_decodes_whatever_the_chunking(step):
    packed = gzip.compress(SSE)
    decode = stream_decoder("gzip")
    out = b"".join(decode(packed[i : i + step]) for i in range(0, len(packed), step)) + decode(b"")
    assert out == SSE
    assert stream_decoder("identity")(b"x") == b"x" and stream_decoder("zstd") is None


LEGACY = (
    b": ping\n\n"
    b"event: endpoint\ndata: /messages/?session_id=ab12\n\n"
    b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
    b"event: message\ndata: [not json\n\n"
)


@pytest.mark.parametrize("step", [1, 9, len(LEGACY)])
def test_the_legacy_stream_names_its_endpoint_then_carries_messages(step):
    stream = LegacyStream("http://127.0.0.1:8000/sse")
    items = []
    for start in range(0, len(LEGACY), step):
        items += stream.feed(LEGACY[start : start + step])
    items += stream.feed(b"")
    endpoint, answer, bad = items
    assert endpoint == EndpointUrl("http://127.0.0.1:8000/messages/?session_id=ab12") and stream.endpoint == endpoint.url
    assert answer.message == Response(id=1, result={}) and answer.via == "stream"
    assert type(bad) is Problem and bad.failure == Failure.JSONRPC_ERROR


def test_an_endpoint_on_another_origin_is_refused():
    stream = LegacyStream("http://127.0.0.1:8000/sse")
    (problem,) = stream.feed(b"event: endpoint\ndata: http://elsewhere.example:80/messages\n\n")
    assert problem.failure == Failure.CONNECT and "another origin" in problem.detail and stream.endpoint is None


PROGRESS = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}\n'


@pytest.mark.parametrize(("resumed", "body", "cursor"), [
    (False, b"id: 1\ndata: \n\n", "1"),  # a POST stream cut after its priming event: resume from it
    (False, b"id: 1\ndata: \n\nid: 2\n" + PROGRESS + b"\n", "2"),
    # A resumed stream: the replay, then a priming event minted after whatever the request sent
    # meanwhile (the SDK's replay-to-live window): resuming from it would skip that for good.
    (True, b"id: 4\n" + PROGRESS + b"\nid: 9\ndata: \n\n", "4"),
    (True, b"id: 9\ndata: \n\n", None),  # nothing new: resume from where this one was resumed from
])
def test_a_stream_resumes_from_its_last_message_not_a_priming_event_minted_after_it(resumed, body, cursor):
    answer = PostAnswer(None if resumed else 7, 200, "text/event-stream", has_session=True, resumed=resumed)
    answer.feed(body)
    assert answer.last_event_id == cursor
