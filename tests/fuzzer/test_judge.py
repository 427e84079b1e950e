"""The fuzzer's parts without a server: values from schemas, mutations, the judge, what may be called."""

import orjson
import pytest
from hypothesis import given, settings
from jsonschema import Draft202012Validator

from mcpbench.fuzz.cases import ODD_STRING, VALID, WRONG_TYPE, CallCase, cases
from mcpbench.fuzz.judge import (
    ACCEPTED_INVALID, CRASH, HANG, LEAK, NON_DETERMINISTIC, OUTPUT_SCHEMA, PROTOCOL, differs, invalid_schema, judge, memory_grew, repeatable,
    slow_bound, state_accepted,
)
from mcpbench.fuzz.protocol_cases import BEFORE_HANDSHAKE, expected_refusal, protocol_cases, tampered, with_changes
from mcpbench.fuzz.run import FuzzSettings, ToolInfo, skip_reason
from mcpbench.fuzz.schemas import from_schema
from mcpbench.fuzz.session import RequestOutcome
from mcpbench.protocol.client import ClientConnection, initialize_request
from mcpbench.protocol.jsonrpc import ErrorResponse, Response
from mcpbench.protocol.versions import LATEST_HANDSHAKE
from mcpbench.replay.report import CallResult, fuzz_note

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "count": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10},
        "ratio": {"type": "number", "maximum": 1.5},
        "mode": {"enum": ["a", "b"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "child": {"$ref": "#/$defs/child"},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    },
    "required": ["name", "count"],
    "$defs": {"child": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}},
}


@settings(max_examples=60, database=None)
@given(from_schema(SCHEMA))
def test_values_drawn_from_a_schema_fit_it(value):
    assert Draft202012Validator(SCHEMA).is_valid(value), value


def answered(result) -> RequestOutcome:
    return RequestOutcome(answer=Response(id=1, result=result), latency=0.01)


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_a_wrong_type_that_a_lax_validator_would_take_is_not_drawn():
    from hypothesis import find

    case = find(cases("t", SCHEMA), lambda c: c.kind == WRONG_TYPE and c.path == "count")
    assert not isinstance(case.arguments["count"], int | float | str | bool)


def test_accepted_invalid_is_judged_by_the_schema_not_by_the_mutation():
    ok = {"content": [{"type": "text", "text": "fine"}]}
    assert [v.cls for v in judge(CallCase("t", WRONG_TYPE, {"name": "x", "count": {"a": 1}}, "count"), answered(ok), SCHEMA, None)] == [ACCEPTED_INVALID]
    assert judge(CallCase("t", ODD_STRING, {"name": "x", "count": 1}, "name"), answered(ok), SCHEMA, None) == []  # still fits: valid
    assert judge(CallCase("t", WRONG_TYPE, {"count": {}}, "count"), answered({**ok, "isError": True}), SCHEMA, None) == []


def test_a_leak_is_what_the_request_did_not_carry():
    trace = 'Traceback (most recent call last):\n  File "/srv/app/tool.py", line 3, in f'
    case = CallCase("t", VALID, {"name": "/home/me/x.txt", "count": 1})
    assert [v.cls for v in judge(case, answered({"content": [{"type": "text", "text": trace}]}), SCHEMA, None)] == [LEAK]
    assert judge(case, answered({"content": [{"type": "text", "text": "saved /home/me/x.txt"}]}), SCHEMA, None) == []
    error = RequestOutcome(answer=ErrorResponse(id=1, code=-32603, message="key sk-abcdefghijklmnopqrstuvwx leaked"))
    assert [v.cls for v in judge(case, error, SCHEMA, None)] == [LEAK]


def test_output_schema_crash_and_hang():
    out = {"type": "object", "properties": {"total": {"type": "string"}}, "required": ["total"]}
    case = CallCase("t", VALID, {"name": "x", "count": 1})
    assert [v.cls for v in judge(case, answered({"content": [], "structuredContent": {"total": 3}}), SCHEMA, out)] == [OUTPUT_SCHEMA]
    assert [v.cls for v in judge(case, answered({"content": []}), SCHEMA, out)] == [OUTPUT_SCHEMA]
    assert judge(case, answered({"content": [], "structuredContent": {"total": "3"}}), SCHEMA, out) == []
    assert [v.cls for v in judge(case, RequestOutcome(lost=True, detail="exited with status 3"), SCHEMA, None)] == [CRASH]
    assert [v.cls for v in judge(case, RequestOutcome(status=502, failure="http-error", detail="bad gateway"), SCHEMA, None)] == [CRASH]
    assert [v.cls for v in judge(case, RequestOutcome(timed_out=True, detail="no answer within 2 s"), SCHEMA, None)] == [HANG]


def test_slow_needs_enough_calls_and_a_margin_over_the_median():
    assert slow_bound([0.001] * 5) is None
    assert slow_bound([0.001] * 30) == pytest.approx(1.001)
    assert slow_bound([0.2] * 30) == pytest.approx(4.0)


@pytest.mark.parametrize(("annotations", "allow", "read_only_only", "called"), [
    ({}, (), False, True),
    ({"destructiveHint": True}, (), False, False),
    ({"destructiveHint": True}, ("t",), False, True),
    ({"readOnlyHint": False}, (), True, False),
    ({"readOnlyHint": True}, (), True, True),
])
def test_destructive_tools_are_called_only_when_allowed(annotations, allow, read_only_only, called):
    settings_ = FuzzSettings(seed=0, allow=allow, read_only_only=read_only_only)
    assert (skip_reason(ToolInfo("t", SCHEMA, None, annotations), settings_) is None) is called


def test_a_repeatable_tool_answering_differently_is_non_deterministic():
    same = {"content": [{"type": "text", "text": "4"}]}
    assert differs(answered(same), answered({**same, "_meta": {"at": 2}})) is None
    asked = {"resultType": "input_required", "inputRequests": {"q": {"method": "elicitation/create"}}}
    assert differs(answered({**asked, "requestState": "v1.a"}), answered({**asked, "requestState": "v1.b"})) is None  # sealed anew each time
    assert differs(answered(same), answered({"content": [{"type": "text", "text": "5"}]})).cls == NON_DETERMINISTIC
    assert differs(answered(same), RequestOutcome(answer=ErrorResponse(id=1, code=-1, message="x"))).cls == NON_DETERMINISTIC
    assert repeatable({"idempotentHint": True}) and repeatable({"readOnlyHint": True}) and not repeatable({})


def test_memory_grows_past_both_an_amount_and_a_factor_over_enough_calls():
    mib = 1 << 20
    assert memory_grew(100 * mib, 200 * mib, 5).cls == "memory"
    assert memory_grew(100 * mib, 200 * mib, 4) is None  # too few calls to say
    assert memory_grew(100 * mib, 150 * mib, 50) is None  # under 64 MiB more
    assert memory_grew(400 * mib, 500 * mib, 50) is None  # under 1.5x


def test_the_header_cases_expect_what_the_core_server_rules_answer():
    conn = ClientConnection("streamable-http", LATEST_HANDSHAKE, url="http://127.0.0.1:1/mcp")
    init = conn.send(initialize_request(conn)).data
    conn.session_id = "S1"
    refused = {}
    for case in protocol_cases("streamable-http"):
        if case.request is not None:
            method, params, version = case.request
            out = conn.prepare(method, params, as_version=version)
            assert expected_refusal(init, "S1", out.headers, out.data) is None, case.name  # as the core sends it: accepted
            refused[case.name] = expected_refusal(init, "S1", with_changes(out.headers, case.headers), out.data)
    found = {name: (r.reply.status, orjson.loads(r.reply.body)["error"]["code"]) for name, r in refused.items() if r is not None}
    assert found == {"call-before-handshake": (400, -32600), "wrong-version-header": (400, -32022),
                     "method-header-mismatch": (400, -32020), "name-header-mismatch": (400, -32020),
                     "version-header-mismatch": (400, -32020)}
    assert refused["missing-version-header"] is None  # the server assumes a version: nothing to refuse
    # stdio has no headers: of these, only the call before the handshake, on a session of its own
    assert set(refused) & {case.name for case in protocol_cases("stdio")} == {BEFORE_HANDSHAKE}


@pytest.mark.parametrize(("cls", "status", "reproduced"), [
    ("crash", "unanswered", True), ("hang", "failed", True), ("crash", "extra", False), ("leak", "identical", True),
    ("leak", "changed", False), ("non-deterministic", "changed", True), ("non-deterministic", "identical", False),
])
def test_a_replayed_finding_says_whether_it_reproduced(cls, status, reproduced):
    calls = [CallResult("s", 0, "initialize", None, "identical"), CallResult("s", 1, "tools/call", "divide", status)]
    note = fuzz_note({"class": cls, "tool": "divide", "evidence": "exited with status 3"}, calls)
    assert note.startswith(f"fuzz finding {cls} in divide (exited with status 3): ")
    assert (": reproduced: tools/call divide came out" in note) is reproduced and ("NOT reproduced" in note) is not reproduced


def test_a_finding_a_replay_cannot_show_says_so():
    note = fuzz_note({"class": "memory", "tool": "remember"}, [CallResult("s", 1, "tools/call", "remember", "identical")])
    assert "cannot show memory" in note and "reproduced" not in note
    note = fuzz_note({"class": "crash", "tool": "(protocol)"}, [CallResult("s", 1, "ping", None, "unanswered")])
    assert "does not send a protocol case's bytes" in note and "reproduced" not in note


def test_a_slow_finding_replays_against_the_latency_it_was_slow_past():
    fuzz = {"class": "slow", "tool": "render", "slow_after_s": 1.0}
    again = CallResult("s", 1, "tools/call", "render", "identical", latency_new=2.1)
    assert ": reproduced: tools/call render took 2.10 s" in fuzz_note(fuzz, [again])
    quick = CallResult("s", 1, "tools/call", "render", "identical", latency_new=0.01)
    assert "NOT reproduced" in fuzz_note(fuzz, [quick])


def test_a_memory_finding_replays_against_the_growth_it_recorded_when_the_replay_sampled_the_server():
    fuzz = {"class": "memory", "tool": "remember", "memory_grew_bytes": 160 << 20}
    calls = [CallResult("s", 1, "tools/call", "remember", "identical")]
    assert ": reproduced: resident memory went from 70 MiB to 264 MiB" in fuzz_note(fuzz, calls, [70 << 20, 264 << 20])
    assert "NOT reproduced" in fuzz_note(fuzz, calls, [70 << 20, 90 << 20])
    assert "cannot show memory" in fuzz_note(fuzz, calls, None)  # an HTTP server: no process of the replay's to sample


def test_a_tampered_request_state_changes_one_character_and_only_a_done_answer_is_a_finding():
    state = "v1.9AlXnPZs1uZqD4YCvjzfLBgN"
    altered = tampered(state)
    assert len(altered) == len(state) and sum(a != b for a, b in zip(altered, state)) == 1
    assert tampered({"step": 1}) != '{"step":1}' and tampered("") != ""
    done = RequestOutcome(answer=Response(id=1, result={"content": [], "resultType": "complete"}))
    assert state_accepted(done, altered).cls == PROTOCOL
    for refused in (RequestOutcome(answer=ErrorResponse(id=1, code=-32602, message="Invalid or expired requestState")),
                    RequestOutcome(answer=Response(id=1, result={"content": [], "isError": True})),
                    RequestOutcome(answer=Response(id=1, result={"resultType": "input_required", "requestState": "x"}))):
        assert state_accepted(refused, altered) is None


def test_an_input_required_answer_is_no_tools_call_result_to_judge():
    asked = RequestOutcome(answer=Response(id=1, result={"resultType": "input_required", "requestState": "s"}))
    assert judge(CallCase("confirm", VALID, {}), asked, None, None) == []


def test_a_schema_that_is_not_json_schema_is_said_why():
    assert invalid_schema({"type": "object", "properties": {"topic": {"type": "text"}}}).startswith("properties/topic/type: ")
    assert invalid_schema("object") is not None and invalid_schema(SCHEMA) is None


def test_2026_07_28_has_no_call_before_a_handshake_and_stdio_and_sse_send_theirs_on_a_session_of_their_own():
    for transport in ("stdio", "sse", "streamable-http"):
        names = [case.name for case in protocol_cases(transport)]
        assert names.count(BEFORE_HANDSHAKE) == 1
        assert BEFORE_HANDSHAKE not in [case.name for case in protocol_cases(transport, handshake=False)]
    assert all(case.fresh for case in protocol_cases("stdio") if case.name == BEFORE_HANDSHAKE)


def test_arguments_past_64_bits_are_sent_and_kept():
    # orjson refuses -2**63 - 1 (a boundary number of the fuzzer's): the reference server's `add` lost its cases to it
    from mcpbench.fuzz.findings import Finding
    from mcpbench.protocol import jsonrpc

    arguments = {"a": -(2**63) - 1, "b": 2**64}
    sent = jsonrpc.encode(jsonrpc.Request(id=1, method="tools/call", params={"name": "add", "arguments": arguments}))
    assert b'"a":-9223372036854775809' in sent and orjson.loads(sent)["params"]["name"] == "add"
    finding = Finding(ACCEPTED_INVALID, CallCase("add", "boundary-number", arguments, "a"), "x")
    assert finding.size() == len('{"a":-9223372036854775809,"b":18446744073709551616}') and "-9223372036854775809" in finding.arguments_text()
