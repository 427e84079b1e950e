"""The replayer's server-request policy: answer what the live server asks from the recording.

`RecordedAsks` is an `asks.AskPolicy` (protocol/asks.py): the client core asks
it for the answer to each server→client request (sampling, roots,
elicitation), on every transport alike. The engine also takes answers from it
for a 2026-07-28 `input_required` round the recording did not have (a replay
in another era).
"""

from collections import defaultdict, deque
from typing import Any

import orjson

from mcpbench.protocol.asks import refusal
from mcpbench.protocol.jsonrpc import METHOD_NOT_FOUND, ErrorResponse, Request, Response
from mcpbench.replay.plan import Ask


def _canonical(method: str, params: Any) -> bytes:
    if isinstance(params, dict) and "_meta" in params:
        params = {k: v for k, v in params.items() if k != "_meta"}
    return orjson.dumps([method, params], option=orjson.OPT_SORT_KEYS)


class RecordedAsks:
    """The recording's answers to server→client requests, by method and params.

    Each key holds a FIFO; when it runs dry the last answer for that key is
    reused (a replay may be asked more often than the recording was), and a
    request with no exact match takes the oldest unused answer to the same
    method. What the recording cannot answer is refused (-32601) and its
    method noted in `missed`.

    Args:
        asks: the recorded server requests with the client's answers (`SessionPlan.asks`).
        missed: where the methods of unanswerable requests are appended.
    """

    def __init__(self, asks: list[Ask], missed: list[str] | None = None) -> None:
        self.missed = missed if missed is not None else []
        self._by_key: dict[bytes, deque[Ask]] = defaultdict(deque)
        self._by_method: dict[str, deque[Ask]] = defaultdict(deque)
        self._last: dict[bytes, Ask] = {}
        for ask in asks:
            if ask.answer is None:
                continue
            self._by_key[_canonical(ask.method, ask.params)].append(ask)
            self._by_method[ask.method].append(ask)

    def take(self, method: str, params: Any) -> dict | None:
        """The recorded answer (`{"result": …}` or `{"error": …}`) to `method` with `params`, or None."""
        key = _canonical(method, params)
        fifo = self._by_key.get(key)
        ask = None
        if fifo:
            ask = fifo.popleft()
        else:
            pending = self._by_method.get(method)
            while pending and ask is None:
                candidate = pending.popleft()
                ckey = _canonical(candidate.method, candidate.params)
                if candidate in self._by_key.get(ckey, ()):
                    self._by_key[ckey].remove(candidate)
                    ask = candidate
            if ask is None:
                ask = self._last.get(key)
        if ask is None:
            return None
        self._last[key] = ask
        try:
            self._by_method[ask.method].remove(ask)
        except ValueError:
            pass
        return ask.answer

    def answer(self, request: Request) -> Response | ErrorResponse:
        found = self.take(request.method, request.params)
        if found is None:
            if request.method == "ping":  # the spec wants every ping answered, recorded or not
                return Response(id=request.id, result={})
            self.missed.append(request.method)
            return refusal(request, "has no recorded answer")
        if "result" in found:
            return Response(id=request.id, result=found["result"])
        error = found["error"]
        return ErrorResponse(id=request.id, code=error.get("code", METHOD_NOT_FOUND),
                             message=error.get("message", ""), data=error.get("data"))

    def capabilities(self) -> dict:
        return {}  # the recording's own client capabilities are declared as recorded


__all__ = ["RecordedAsks"]
