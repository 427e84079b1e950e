"""`serve-trace --transport stdio`: the mock over stdin and stdout, a shell around `ServerConnection`."""

import os
import threading

from mcpbench.files.fdio import write_all
from mcpbench.protocol.server import STDIO_SESSION, Accepted, Call, Refused, ServerConnection
from mcpbench.protocol.transports import STDIO
from mcpbench.protocol.versions import CANCELLED
from mcpbench.replay.engine import Pace
from mcpbench.replay.forward import Forwarder
from mcpbench.replay.mock_answers import TraceAnswers, answer_for
from mcpbench.replay.mock_play import ASK_TIMEOUT, DEFAULT_PACE, Player

READ_SIZE = 64 * 1024
# Threads of answered calls are dropped from the list once it holds this many (a long session).
KEPT_THREADS = 64


def serve_stdio(answers: TraceAnswers, stdin: int = 0, stdout: int = 1, *, forward: Forwarder | None = None,
                pace: Pace = DEFAULT_PACE) -> None:
    """Answer newline-delimited JSON-RPC on `stdin` until EOF. Each request runs on its own thread."""
    conn = ServerConnection(STDIO)
    lock = threading.Lock()  # the connection's
    out = threading.Lock()  # stdout's: whole lines, one writer at a time
    player = Player(conn, lock, pace)
    threads: list[threading.Thread] = []

    def write(data: bytes) -> None:
        with out:
            write_all(stdout, data)

    def handle(call: Call) -> None:
        player.play(call, answer_for(answers, call.request, forward, STDIO_SESSION), write)

    if forward is not None:
        forward.attach(STDIO_SESSION, lambda message: write(conn.push(message)))
    while True:
        try:
            chunk = os.read(stdin, READ_SIZE)
        except OSError:
            chunk = b""
        with lock:
            events = conn.receive_stdin(chunk)
        for event in events:
            kind = type(event)
            if kind is Call:
                thread = threading.Thread(target=handle, args=(event,), daemon=True)
                thread.start()
                threads.append(thread)
                if len(threads) > KEPT_THREADS:
                    threads = [t for t in threads if t.is_alive()]
            elif kind is Accepted:
                if event.waiter is not None:
                    event.waiter.put(event.message)
                elif getattr(event.message, "method", None) == CANCELLED:
                    answers.cancelled(STDIO_SESSION, event.message.params)
            elif kind is Refused:
                try:
                    write(event.reply.body)
                except OSError:
                    pass  # the client went away
        if not chunk:
            break
    answers.end(STDIO_SESSION)  # a listen stream held open ends with its client
    for thread in threads:
        thread.join(ASK_TIMEOUT)
    if forward is not None:
        forward.close()
