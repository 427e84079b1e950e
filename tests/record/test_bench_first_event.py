"""The first-event probe of `mcpbench bench proxy`: one raw-socket client for every path."""

import socket
import threading
import time

from mcpbench.bench.proxy import _first_event, _raw_request

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _serve(sock: socket.socket, parts: list[tuple[float, bytes]], seen: list[bytes]) -> None:
    seen.append(sock.recv(65536))
    for delay, data in parts:
        time.sleep(delay)
        sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)


def _probe(parts: list[tuple[float, bytes]]) -> tuple[dict | None, bytes]:
    client, server = socket.socketpair()
    seen: list[bytes] = []
    thread = threading.Thread(target=_serve, args=(server, parts, seen))
    thread.start()
    try:
        return _first_event(client, _raw_request("GET", "/sse", 8000, {"accept": "text/event-stream"})), seen[0]
    finally:
        thread.join()
        client.close()
        server.close()


def test_first_event_waits_for_a_whole_event() -> None:
    event = b"event: endpoint\r\ndata: /messages/?session_id=ab\r\n\r\n"
    marks, request = _probe([
        (0, HEAD),
        (0, _chunk(b": comment\r\n\r\n")),  # not an event
        (0.03, _chunk(event[:20])),  # an event cut in two chunks
        (0.05, _chunk(event[20:])),
        (0, b"0\r\n\r\n"),
    ])
    assert request == b"GET /sse HTTP/1.1\r\nhost: 127.0.0.1:8000\r\naccept: text/event-stream\r\n\r\n"
    assert marks is not None
    assert marks["first_byte"] <= marks["first_body_byte"] < marks["first_event"]
    assert marks["first_event"] - marks["first_body_byte"] >= 70  # the event's end, not its start


def test_no_event_is_none() -> None:
    marks, _ = _probe([(0, HEAD), (0, _chunk(b": only a comment\n\n")), (0, b"0\r\n\r\n")])
    assert marks is None
