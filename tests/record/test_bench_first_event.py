"""The first-event probe of `mcpbench bench proxy`: one raw-socket client for every path.

The probe's clock is replaced by a stepped one (0 at the request, then 1, 2, … at each `recv`), and
the server sends each part only once the probe has read the one before: every part arrives in a
`recv` of its own, and the marks are exact, whatever the machine's speed.
"""

import socket
import threading

import pytest

from mcpbench.bench import proxy
from mcpbench.bench.proxy import _first_event, _raw_request

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
WAIT = 30.0  # a bound for the server's wait on the probe; never a timing assertion


class SteppedClock:
    """A `perf_counter` that returns 0, 1, 2, … one step per call, and lets a thread wait for a step."""

    def __init__(self) -> None:
        self.steps = 0
        self.changed = threading.Condition()

    def __call__(self) -> float:
        with self.changed:
            value = self.steps
            self.steps += 1
            self.changed.notify_all()
        return float(value)

    def reached(self, steps: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.steps >= steps, WAIT)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _serve(sock: socket.socket, parts: list[bytes], seen: list[bytes], clock: SteppedClock) -> None:
    seen.append(sock.recv(65536))
    for number, data in enumerate(parts):
        if not clock.reached(number + 1):  # the request's step, then one per part the probe has read
            break
        sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SteppedClock:
    stepped = SteppedClock()
    monkeypatch.setattr(proxy.time, "perf_counter", stepped)
    return stepped


def _probe(parts: list[bytes], clock: SteppedClock) -> tuple[dict | None, bytes]:
    client, server = socket.socketpair()
    seen: list[bytes] = []
    thread = threading.Thread(target=_serve, args=(server, parts, seen, clock))
    thread.start()
    try:
        return _first_event(client, _raw_request("GET", "/sse", 8000, {"accept": "text/event-stream"})), seen[0]
    finally:
        thread.join(WAIT)
        client.close()
        server.close()


def test_first_event_waits_for_a_whole_event(clock: SteppedClock) -> None:
    event = b"event: endpoint\r\ndata: /messages/?session_id=ab\r\n\r\n"
    marks, request = _probe([
        HEAD,  # read at step 1
        _chunk(b": comment\r\n\r\n"),  # step 2: the first body byte, not an event
        _chunk(event[:20]),  # step 3: an event cut in two chunks
        _chunk(event[20:]),  # step 4: the event's end
    ], clock)
    assert request == b"GET /sse HTTP/1.1\r\nhost: 127.0.0.1:8000\r\naccept: text/event-stream\r\n\r\n"
    # milliseconds from the request (step 0): the event's end, not its start (3000)
    assert marks == {"first_byte": 1000.0, "first_body_byte": 2000.0, "first_event": 4000.0}


def test_no_event_is_none(clock: SteppedClock) -> None:
    marks, _ = _probe([HEAD, _chunk(b": only a comment\n\n"), b"0\r\n\r\n"], clock)
    assert marks is None
