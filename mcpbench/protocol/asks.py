"""What a client answers when the server asks: one policy object, whatever the transport.

Server→client requests (`roots/list`, `sampling/createMessage`,
`elicitation/create`, `ping`) reach every shell of the client core the same way
(`client.ServerRequest`); the core asks the connection's policy for the answer,
so a load user over stdio, legacy SSE or Streamable HTTP answers alike:

- `Refuse`: JSON-RPC -32601 to everything but `ping` (the default).
- `Canned`: fixed results per method, from a scenario (`server_requests:`), the rest refused.
- the replayer's `RecordedAsks` (replay/asks.py): the answers the recording holds.
- `Relay`: no answer from the policy; the shell relays the request and answers later
  (serve-trace's forwarder asks the mock's own client).

`ping` is always answered with `{}`: the spec requires a prompt answer from either side.
"""

from typing import Any, Protocol

from mcpbench.protocol.jsonrpc import METHOD_NOT_FOUND, ErrorResponse, Request, Response

# Capabilities a client declares for the server requests it can answer (lifecycle, "Capability Negotiation").
CAPABILITY_OF = {"roots/list": "roots", "sampling/createMessage": "sampling", "elicitation/create": "elicitation"}


class AskPolicy(Protocol):
    """Answers one server→client request; None leaves the answer to the shell
    (a proxy relaying the request to its own client answers later, with `ClientConnection.send`)."""

    def answer(self, request: Request) -> Response | ErrorResponse | None: ...

    def capabilities(self) -> dict: ...


def refusal(request: Request, why: str = "not supported by this client") -> ErrorResponse:
    return ErrorResponse(id=request.id, code=METHOD_NOT_FOUND, message=f"mcpbench: {request.method} {why}")


class Refuse:
    """Refuses every server request but `ping`."""

    def answer(self, request: Request) -> Response | ErrorResponse:
        if request.method == "ping":
            return Response(id=request.id, result={})
        return refusal(request)

    def capabilities(self) -> dict:
        return {}


class Canned:
    """Answers the methods in `results` with a fixed result; refuses the rest (and any given None).

        Canned({"roots/list": {"roots": [{"uri": "file:///tmp", "name": "tmp"}]},
                "sampling/createMessage": None})          # None: refused
    """

    def __init__(self, results: dict[str, dict[str, Any] | None] | None = None) -> None:
        self.results = dict(results or {})

    def answer(self, request: Request) -> Response | ErrorResponse:
        if request.method == "ping":
            return Response(id=request.id, result={})
        result = self.results.get(request.method)
        if result is None:
            return refusal(request, "refused by the scenario" if request.method in self.results else "not supported by this client")
        return Response(id=request.id, result=result)

    def capabilities(self) -> dict:
        return {CAPABILITY_OF[m]: {} for m, result in self.results.items() if result is not None and m in CAPABILITY_OF}


class Relay:
    """Leaves every server request but `ping` to the shell, which relays it and sends the answer it gets."""

    def answer(self, request: Request) -> Response | None:
        return Response(id=request.id, result={}) if request.method == "ping" else None

    def capabilities(self) -> dict:
        return {}
