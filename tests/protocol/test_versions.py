"""The version table and what it answers: one place for every era and version rule."""

import ast
import dataclasses
from pathlib import Path

import pytest

import mcpbench.protocol
from mcpbench.protocol.versions import (
    INPUT_RESPONSES,
    LATEST_HANDSHAKE,
    META_CLIENT_INFO,
    REQUEST_STATE,
    VERSIONS,
    Era,
    VersionRules,
    allows_server_requests,
    asks_for_input,
    call_name,
    envelope,
    era_name,
    era_title,
    era_version,
    eras_differ,
    has_get_stream,
    has_handshake,
    has_legacy_sse,
    has_method,
    progress_token,
    request_era,
    step_name,
    translate,
)

HANDSHAKE_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
STATELESS = "2026-07-28"


def test_every_rule_of_the_table_is_read():
    # By the core, which answers for it (`has_method`, `translate`, the session's checks, …): a
    # field that no code of protocol/ reads by name is decoration.
    read = {
        node.attr
        for path in Path(mcpbench.protocol.__file__).parent.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
    }
    fields = [field.name for field in dataclasses.fields(VersionRules)]
    assert [name for name in fields if name not in read] == []
    assert len(fields) >= 10


def test_the_table_knows_the_five_versions_in_order():
    assert list(VERSIONS) == [*HANDSHAKE_VERSIONS, STATELESS]
    assert all(rules.version == version for version, rules in VERSIONS.items())


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS + [None, "2099-01-01"])
def test_a_handshake_version_or_an_unknown_one_has_the_handshake_and_its_methods(version):
    assert has_handshake(version)
    assert has_method(version, "initialize") and has_method(version, "notifications/initialized")
    assert has_method(version, "ping") and not has_method(version, "server/discover")
    assert has_legacy_sse(version) and allows_server_requests(version) and has_get_stream(version)
    assert era_name(version) == "handshake"


def test_2026_07_28_has_no_handshake_ping_get_stream_or_server_requests_but_runs_over_legacy_sse():
    assert not has_handshake(STATELESS)
    assert [m for m in ("initialize", "notifications/initialized", "ping") if has_method(STATELESS, m)] == []
    assert has_method(STATELESS, "server/discover") and has_method(STATELESS, "tools/call")
    assert not allows_server_requests(STATELESS) and not has_get_stream(STATELESS)
    assert has_legacy_sse(STATELESS)  # the official SDK serves and speaks it: every command accepts it
    assert era_name(STATELESS) == STATELESS


def test_2024_11_05_on_streamable_http_is_read_as_the_default_version():
    # 2024-11-05 defines no Streamable HTTP; without MCP-Protocol-Version a server assumes 2025-03-26.
    assert not VERSIONS["2024-11-05"].get_stream
    assert has_get_stream("2024-11-05")


@pytest.mark.parametrize(("name", "version"), [
    ("handshake", LATEST_HANDSHAKE), (STATELESS, STATELESS), ("2025-06-18", "2025-06-18"),
    ("stateless", None), ("2099-01-01", None), ("", None),
])
def test_a_scenario_era_names_a_version(name, version):
    assert era_version(name) == version


def test_era_titles():
    assert era_title(Era.HANDSHAKE) == "handshake-era"
    assert era_title(Era.HANDSHAKE, span=True) == "handshake-era (2024-11-05 … 2025-11-25)"
    assert era_title(Era.STATELESS) == era_title(Era.STATELESS, span=True) == STATELESS


@pytest.mark.parametrize(("method", "params", "era"), [
    ("initialize", {"protocolVersion": "2025-06-18"}, Era.HANDSHAKE),
    ("initialize", {"protocolVersion": "2099-01-01"}, Era.HANDSHAKE),
    ("initialize", None, Era.HANDSHAKE),
    ("server/discover", None, Era.STATELESS),
    ("tools/call", {"name": "echo", "_meta": envelope(STATELESS)}, Era.STATELESS),
    ("tools/call", {"name": "echo"}, None),
])
def test_the_era_a_request_shows(method, params, era):
    assert request_era(method, params) is era


def test_eras_differ_only_between_two_known_versions():
    assert eras_differ("2025-06-18", STATELESS) and eras_differ(STATELESS, "2024-11-05")
    assert not eras_differ("2025-06-18", "2025-11-25")
    assert not eras_differ(None, STATELESS) and not eras_differ("2099-01-01", STATELESS)


# --- translate ---------------------------------------------------------------------------------


def test_within_one_era_nothing_changes():
    params = {"name": "echo", "_meta": envelope(STATELESS)}
    assert translate("tools/call", params, STATELESS, STATELESS) == (params, None)
    assert translate("tools/call", params, STATELESS, STATELESS)[0] is params
    assert translate("ping", None, "2025-06-18", "2024-11-05") == (None, None)


@pytest.mark.parametrize("recorded", ["2025-06-18", None, "2099-01-01"])
@pytest.mark.parametrize("method", ["initialize", "notifications/initialized", "ping"])
def test_to_2026_07_28_the_handshake_and_ping_go(recorded, method):
    assert translate(method, {}, recorded, STATELESS) == (None, f"{method} does not exist in {STATELESS}")


def test_to_2026_07_28_a_call_stays_as_it_was():
    params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": 1}}
    sent, dropped = translate("tools/call", params, "2025-11-25", STATELESS)
    assert sent is params and dropped is None


def test_to_the_handshake_era_server_discover_goes():
    assert translate("server/discover", {"_meta": envelope(STATELESS)}, STATELESS, "2025-11-25") == (
        None, "server/discover is replaced by initialize in 2025-11-25")


def test_to_the_handshake_era_an_input_round_goes_and_its_retry_loses_the_answers():
    assert translate("tools/call", {"name": "ask"}, STATELESS, "2025-06-18", input_round=True) == (
        None, "an input_required round: a server request in 2025-06-18")
    retry = {"name": "ask", INPUT_RESPONSES: {"q": {"action": "accept"}}, REQUEST_STATE: "sealed"}
    assert translate("tools/call", retry, STATELESS, "2025-06-18", input_retry=True) == ({"name": "ask"}, None)
    # Not a retry: its params are the recording's own.
    assert translate("tools/call", retry, STATELESS, "2025-06-18")[0] == retry


def test_to_the_handshake_era_the_envelope_leaves_meta():
    meta = {**envelope(STATELESS, client_info={"name": "c", "version": "1"}), "progressToken": 7}
    assert META_CLIENT_INFO in meta
    assert translate("tools/call", {"name": "echo", "_meta": meta}, STATELESS, "2025-11-25") == (
        {"name": "echo", "_meta": {"progressToken": 7}}, None)
    assert translate("tools/list", {"_meta": envelope(STATELESS)}, STATELESS, "2025-11-25") == ({}, None)


# --- request parameters ------------------------------------------------------------------------


def test_names_and_tokens():
    assert call_name("tools/call", {"name": "echo"}) == "echo"
    assert call_name("resources/read", {"uri": "mcpbench://greeting"}) == "mcpbench://greeting"
    assert call_name("tools/list", {"name": "echo"}) is None and call_name("tools/call", {"name": 3}) is None
    assert step_name("prompts/get", {"name": "summarize"}) == "prompts/get summarize"
    assert step_name("tools/call", None) == "tools/call"
    assert progress_token({"_meta": {"progressToken": "t1"}}) == "t1"
    assert progress_token({"progressToken": "t1"}) is None
    assert progress_token([1, 2]) is None and progress_token(None) is None


def test_an_input_required_result():
    assert asks_for_input({"resultType": "input_required", "inputRequests": {}})
    assert not asks_for_input({"resultType": "complete"}) and not asks_for_input(None) and not asks_for_input([])
