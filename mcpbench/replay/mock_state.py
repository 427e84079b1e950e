"""The mock's own `requestState` (2026-07-28 input rounds), sealed and checked as a server must, with no I/O.

A recorded `input_required` result carried the state the recorded server sealed; a client of the
mock must echo what the mock sent, so the mock sends a state of its own in its place
(`MockStates.seal`), bound to the request that got it (its method and params, answers and state
left out) and sealed with an HMAC under a key of this process (SEP-2322: the state is
attacker-controlled input; "servers MUST protect its integrity … and MUST reject state that fails
verification"). A retry's state is opened with `MockStates.check`: one the mock did not issue
(forged, altered, another server's), one issued for another request, and a retry missing the state
its round was sent are refused with -32602, the error the official SDK's `RequestStateBoundary`
answers, naming what is wrong.

Retries are matched on the keys of their `inputResponses`, not on the answers (`retry_key`): the
client's answers need not be the recording's, only answer what was asked.
"""

import base64
import hashlib
import hmac
import os
from typing import Any

import orjson

from mcpbench.protocol.jsonrpc import INVALID_PARAMS
from mcpbench.protocol.versions import INPUT_REQUESTS, INPUT_RESPONSES, REQUEST_STATE, asks_for_input

# What the mock's states start with: told apart from a recorded server's at a glance.
PREFIX = "mcpbench-mock."
# How much of a refused state an error message shows.
SHOWN = 24


def retry_key(params: Any) -> Any:
    """`params` as a retry is matched: no `requestState`, and `inputResponses` as the sorted list of its keys."""
    if not isinstance(params, dict) or (REQUEST_STATE not in params and INPUT_RESPONSES not in params):
        return params
    out = {k: v for k, v in params.items() if k != REQUEST_STATE}
    responses = out.get(INPUT_RESPONSES)
    if isinstance(responses, dict):
        out[INPUT_RESPONSES] = sorted(responses)
    return out


def _bound(method: str, params: Any) -> str:
    """A digest of the request a state belongs to: its method and params, without `_meta`, answers or state."""
    kept = {k: v for k, v in params.items() if k not in ("_meta", INPUT_RESPONSES, REQUEST_STATE)} if isinstance(params, dict) else params
    return hashlib.sha256(orjson.dumps([method, kept], option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


class MockStates:
    """Seals and checks the mock's states under a key of its own (`key`: tests give one)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or os.urandom(32)

    def _mac(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode(), hashlib.sha256).digest()[:20])

    def seal(self, method: str, params: Any, result: dict) -> dict:
        """`result` (an `input_required` one that carried a state) with the mock's state in place of the recorded one."""
        asked = sorted(result[INPUT_REQUESTS]) if isinstance(result.get(INPUT_REQUESTS), dict) else []
        payload = _b64(orjson.dumps({"b": _bound(method, params), "k": asked, "n": _b64(os.urandom(6))}))
        return {**result, REQUEST_STATE: f"{PREFIX}{payload}.{self._mac(payload)}"}

    def check(self, method: str, params: Any, recorded_state: bool) -> dict | None:
        """The JSON-RPC error a request's `requestState` earns, or None when it may be answered.

        `recorded_state`: the recorded request this one is matched to carried a state (so must this one).
        """
        state = params.get(REQUEST_STATE) if isinstance(params, dict) else None
        if state is None:
            if recorded_state and isinstance(params, dict) and INPUT_RESPONSES in params:
                return _refusal(f"the retry of {method} carries no requestState: the round before it was sent one, "
                                "to be echoed as it came")
            return None
        shown = repr(state[:SHOWN]) + ("…" if len(str(state)) > SHOWN else "") if isinstance(state, str) else repr(state)
        if not isinstance(state, str) or not state.startswith(PREFIX) or state.count(".") != 2:
            return _refusal(f"requestState {shown} is not one this mock issued (forged, or another server's)")
        payload, mac = state[len(PREFIX):].split(".")
        if not hmac.compare_digest(mac, self._mac(payload)):
            return _refusal(f"requestState {shown} fails its integrity check (altered, or another mock's)")
        try:
            claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (ValueError, orjson.JSONDecodeError):
            return _refusal(f"requestState {shown} is malformed")
        if claims.get("b") != _bound(method, params):
            return _refusal(f"requestState {shown} was issued for another request than this {method}")
        return None

    def issue(self, method: str, params: Any, answer: dict) -> dict:
        """The answer to send: an `input_required` result whose recording carried a state gets the mock's own."""
        result = answer.get("result")
        if not asks_for_input(result) or REQUEST_STATE not in result:
            return answer
        return {**answer, "result": self.seal(method, params, result)}


def _refusal(message: str) -> dict:
    return {"code": INVALID_PARAMS, "message": f"mcpbench serve-trace: {message}", "data": {"reason": "invalid_request_state"}}


__all__ = ["MockStates", "PREFIX", "retry_key"]
