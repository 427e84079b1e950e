"""`serve-trace` and the 2026-07-28 input round's `requestState`: its own, sealed; the echo checked.

The recording is real: the official SDK 2.x client against an SDK server whose round carries a state
the SDK seals (tests/support/sealing_server.py), through the tee. The mock serves it with a state of
its own, takes a retry that answers the recorded keys (whatever the answers), and refuses a forged,
altered, foreign or missing state with -32602 naming it, as the SDK server does.
"""

import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError

from mcpbench.protocol.jsonrpc import INVALID_PARAMS, Request
from mcpbench.replay import plan as plans
from mcpbench.replay.serve_trace import TraceAnswers
from mcpbench.replay.mock_state import PREFIX, MockStates
from tests.replay.helpers import TIMEOUT, mock_server, text_of
from tests.support.recordings import tee_argv
from tests.support.servers import REPO_ROOT, stdio_params

SERVER = [sys.executable, str(REPO_ROOT / "tests" / "support" / "sealing_server.py")]
CONFIRM = {"name": "confirm", "arguments": {"item": "widget"}}
RECORDED_TEXT = "asked:widget: accept"  # the recorded server's final answer (its state opened on the retry)
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


async def accept(_ctx, _params) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": "yes"})


async def decline(_ctx, _params) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One recorded `confirm`: the SDK server's sealed state, the SDK client's input-required driver."""
    out = tmp_path_factory.mktemp("sealed") / "sealed.jsonl"

    async def record() -> None:
        with anyio.fail_after(TIMEOUT):
            async with Client(stdio_params(tee_argv(out, SERVER)), mode="auto", elicitation_callback=accept) as client:
                assert text_of(await client.call_tool("confirm", CONFIRM["arguments"])) == RECORDED_TEXT

    anyio.run(record)
    return out


def recorded_state(trace: Path) -> str:
    calls = [c for s in plans.load(trace).sessions for c in s.calls if c.method == "tools/call"]
    return calls[0].answer.result["requestState"]


def call(request_id: int, **extra) -> Request:
    return Request(id=request_id, method="tools/call", params={**CONFIRM, "_meta": ENVELOPE, **extra}, _parsed=True)


def first_round(answers: TraceAnswers) -> dict:
    result = answers.lookup(call(1)).answer["result"]
    assert result["resultType"] == "input_required" and list(result["inputRequests"]) == ["confirm"]
    return result


def test_the_mock_issues_its_own_state_and_takes_its_echo_with_the_recorded_keys(sealed):
    answers = TraceAnswers(plans.load(sealed))
    state = first_round(answers)["requestState"]
    assert state.startswith(PREFIX) and state != recorded_state(sealed)  # not the recorded server's sealed one
    final = answers.lookup(call(2, inputResponses={"confirm": {"action": "decline"}}, requestState=state)).answer
    assert final["result"]["content"][0]["text"] == RECORDED_TEXT  # other answers, the same keys: the recorded end


@pytest.mark.parametrize("bad, said", [
    ("forged", "is not one this mock issued"),
    ("recorded", "is not one this mock issued"),  # the recorded server's state, echoed to the mock
    ("altered", "fails its integrity check"),
    ("another mock", "fails its integrity check"),
    (None, "carries no requestState"),
])
def test_a_forged_altered_foreign_or_missing_state_is_refused_naming_it(sealed, bad, said):
    answers = TraceAnswers(plans.load(sealed))
    state = first_round(answers)["requestState"]
    given = {
        "forged": "v1.not-a-state",
        "recorded": recorded_state(sealed),
        "altered": state[:-1] + ("A" if state[-1] != "A" else "B"),
        "another mock": MockStates(b"k" * 32).seal("tools/call", CONFIRM, {"inputRequests": {"confirm": {}}})["requestState"],
        None: None,
    }[bad]
    extra = {"inputResponses": {"confirm": {"action": "accept", "content": {"answer": "yes"}}}}
    if given is not None:
        extra["requestState"] = given
    error = answers.lookup(call(2, **extra)).answer["error"]
    assert error["code"] == INVALID_PARAMS and said in error["message"], error
    if given is not None:
        assert repr(given[:24]) in error["message"]  # the state is named
    # The round is not used up: the echo of the mock's own state still gets the recorded end.
    ok = answers.lookup(call(3, **{**extra, "requestState": state})).answer
    assert ok["result"]["content"][0]["text"] == RECORDED_TEXT


async def sdk_against_mock(target) -> tuple[str, MCPError]:
    with anyio.fail_after(TIMEOUT):
        async with Client(target, mode="auto", elicitation_callback=decline) as client:
            text = text_of(await client.call_tool("confirm", CONFIRM["arguments"]))  # the SDK's input-required driver
            with pytest.raises(MCPError) as forged:
                await client.session.call_tool("confirm", CONFIRM["arguments"], request_state="v1.forged",
                                               input_responses={"confirm": types.ElicitResult(action="accept")})
            return text, forged.value


@pytest.mark.parametrize("transport", ["stdio", "streamable-http", "sse"])
def test_the_sdk_clients_input_required_driver_completes_against_the_mock(sealed, transport):
    if transport == "stdio":
        target = stdio_params([sys.executable, "-m", "mcpbench", "serve-trace", str(sealed)])
        text, forged = anyio.run(sdk_against_mock, target)
    else:
        with mock_server(sealed, transport) as url:
            text, forged = anyio.run(sdk_against_mock, sse_client(url) if transport == "sse" else url)
    assert text == RECORDED_TEXT
    assert forged.error.code == INVALID_PARAMS and "'v1.forged' is not one this mock issued" in forged.error.message
