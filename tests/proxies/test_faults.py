"""Fault injection: the plan's parsing and decisions, then the addon in a real proxy in front of real servers."""

import json
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mcpbench.proxies.faultplan import Decider, FaultConfigError, FaultPlan, addon_settings, parse_plan
from tests.hostile.helpers import EXIT_INPUT, assert_clean_failure, run
from tests.support.faults import (
    STREAM_TIMEOUT,
    connection,
    fault_proxy,
    fault_records,
    initialize,
    post,
    read_first_line,
    read_until_closed,
    start_stream_get,
    wait_for,
)
from tests.support.servers import reference_server

CUT = 2.0  # seconds: the cut the stream tests ask for (a handshake through the proxy ends well before)


@pytest.fixture(scope="module")
def stateless_json_server():
    """Streamable HTTP without sessions and with JSON answers: every request stands alone."""
    with reference_server("streamable-http", stateless=True, json_response=True) as server:
        yield server


# --- the plan, without I/O ----------------------------------------------------------------------

def test_parse_plan_reads_every_option():
    plan = parse_plan(cut_streams_after="61s", idle_timeout="500ms", drop="5%", drop_as="503", delay="20ms±10ms",
                      faults_from="10s", faults_until="1m", seed="7")
    assert plan == FaultPlan(cut_streams_after=61.0, idle_timeout=0.5, drop=0.05, drop_as="503", delay=0.02,
                             jitter=0.01, faults_from=10.0, faults_until=60.0, seed=7)
    assert parse_plan(delay="20ms+-5ms", drop="0.25").jitter == 0.005 and parse_plan(drop="0.25").drop == 0.25
    assert parse_plan().any is False and parse_plan(drop="1%").any
    assert addon_settings({"drop": "5%", "delay": None}, "f.jsonl") == [
        "--set", "mcpbench_faults_drop=5%", "--set", "mcpbench_faults_log=f.jsonl"]


def test_buffer_sse_is_a_flag_everywhere():
    from mcpbench.proxies.cli import fault_argv

    assert parse_plan(buffer_sse="true").buffer_sse and parse_plan(buffer_sse=True).any and not parse_plan(buffer_sse="false").any
    assert addon_settings({"buffer_sse": True}) == ["--set", "mcpbench_faults_buffer_sse=True"]
    assert fault_argv({"buffer_sse": True, "drop": "5%", "delay": None}, None) == ["--buffer-sse", "--drop=5%"]  # lab up --detach


@pytest.mark.parametrize(("option", "value", "mention"), [
    ("buffer_sse", "maybe", "--buffer-sse"),
    ("drop", "150%", "--drop"), ("drop", "lots", "--drop"), ("drop_as", "404", "--drop-as"),
    ("delay", "soon±1ms", "--delay"), ("cut_streams_after", "0s", "--cut-streams-after"),
    ("idle_timeout", "-1s", "--idle-timeout"), ("seed", "x", "--seed"), ("faults_until", "0s", "--faults-until"),
])
def test_parse_plan_names_the_bad_option(option, value, mention):
    with pytest.raises(FaultConfigError, match=mention):
        parse_plan(**{option: value})


def test_decider_is_seeded_and_keeps_to_the_schedule():
    plan = parse_plan(drop="30%", delay="100ms±50ms", faults_from="10s", faults_until="20s", seed="3")
    first, second = Decider(plan), Decider(plan)
    draws = [(first.drop(15.0), first.delay(15.0)) for _ in range(200)]
    assert draws == [(second.drop(15.0), second.delay(15.0)) for _ in range(200)]
    dropped = sum(d for d, _ in draws)
    assert 30 <= dropped <= 90  # 30% of 200 is 60; a seeded draw, far inside 4 standard deviations
    assert all(0.05 <= pause <= 0.15 for _, pause in draws)
    assert not any(first.drop(t) or first.delay(t) for t in (0.0, 9.99, 20.0, 30.0))
    cut = Decider(parse_plan(cut_streams_after="5s", faults_from="10s"))
    assert not cut.cut_due(opened=0.0, now=9.0) and cut.cut_due(opened=0.0, now=10.0) and not cut.cut_due(opened=8.0, now=12.0)


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_bad_values_are_one_line_and_status_2():
    up = ["faults", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:0"]
    assert_clean_failure(run([*up, "--drop", "150%"]), EXIT_INPUT, "--drop")
    assert_clean_failure(run([*up, "--delay", "20ms±x"]), EXIT_INPUT, "--delay")
    assert_clean_failure(run([*up, "--drop-as", "404"]), EXIT_INPUT, "--drop-as")
    assert_clean_failure(run(["faults", "--upstream", "ftp://x/", "--drop", "1%"]), EXIT_INPUT, "--upstream")
    assert_clean_failure(run(["faults", "stdio", "--kill-after", "soon", "--", "true"]), EXIT_INPUT, "--kill-after")


# --- the addon in a real proxy --------------------------------------------------------------------

@pytest.mark.slow
def test_a_get_stream_and_a_post_sse_answer_are_cut_after_t(tmp_path, http_server):
    log = tmp_path / "faults.jsonl"
    with fault_proxy(http_server.url, "--cut-streams-after", f"{CUT}s", "--fault-log", str(log)) as url:
        headers = initialize(url)  # its SSE answer ends before the cut
        conn, stream = start_stream_get(url, headers)
        assert stream.status == 200
        _, cut = read_until_closed(stream)  # the SDK's GET stream never ends by itself
        conn.close()
        assert cut

        call = connection(url)
        answer = post(call, urlsplit(url).path, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "slow", "arguments": {"seconds": 20, "steps": 40}, "_meta": {"progressToken": "p"}}}, headers)
        assert answer.status == 200 and answer.getheader("content-type").startswith("text/event-stream")
        body, cut = read_until_closed(answer)
        assert cut  # long before the tool's answer: it carried progress, and no result
        assert b"notifications/progress" in body and b'"result"' not in body
    cuts = [r for r in fault_records(log) if r["kind"] == "cut-stream"]
    assert [(r["method"], r["path"]) for r in cuts] == [("GET", "/mcp"), ("POST", "/mcp")]
    # cut when the plan says, by the proxy's own record (the cause, not a stopwatch in the test)
    assert all(r["after_s"] >= CUT and r["flow"] and r["client"].startswith("127.0.0.1:") for r in cuts)


@pytest.mark.slow
def test_a_stream_is_not_cut_before_its_first_bytes_passed(tmp_path, http_server):
    """A stream with nothing passed when its time is up (no priming event: this server keeps no events;
    in the soak, a starved proxy that had not yet handed the first event on) is cut right after its
    first bytes: a cut before them would leave the client no event id, which no client can resume
    from. Here `slow`'s first progress comes 1 s after the cut was due; the cut then waits for it."""
    log = tmp_path / "faults.jsonl"
    with fault_proxy(http_server.url, "--cut-streams-after", f"{CUT}s", "--fault-log", str(log)) as url:
        headers = initialize(url)
        call = connection(url)
        answer = post(call, urlsplit(url).path, {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
            "name": "slow", "arguments": {"seconds": 3 * CUT, "steps": 2}, "_meta": {"progressToken": "q"}}}, headers)
        assert answer.status == 200 and answer.getheader("content-type").startswith("text/event-stream")
        body, cut = read_until_closed(answer)
        call.close()
    assert cut and b'"result"' not in body
    assert body.count(b"notifications/progress") == 1, body  # the first event passed, then the cut
    [record] = [r for r in fault_records(log) if r["kind"] == "cut-stream"]
    assert record["held"] is True and CUT < record["after_s"] < 2 * CUT, record


@pytest.mark.slow
def test_the_legacy_sse_stream_is_cut_after_t(tmp_path, sse_server):
    log = tmp_path / "faults.jsonl"
    with fault_proxy(sse_server.url, "--cut-streams-after", f"{CUT}s", "--fault-log", str(log)) as url:
        conn, stream = start_stream_get(url, {})
        assert stream.status == 200
        body, cut = read_until_closed(stream)
        assert cut
        assert b"event: endpoint" in body
        conn.close()
    cuts = [r for r in fault_records(log) if r["kind"] == "cut-stream"]
    assert [r["path"] for r in cuts] == ["/sse"] and cuts[0]["after_s"] >= CUT


@pytest.mark.slow
def test_a_drop_share_is_seeded_and_logged_over_200_requests(tmp_path, stateless_json_server):
    log = tmp_path / "faults.jsonl"
    requests = 200
    with fault_proxy(stateless_json_server.url, "--drop", "25%", "--drop-as", "503", "--seed", "11", "--fault-log", str(log)) as url:
        conn = connection(url)
        statuses = []
        for n in range(requests):
            answer = post(conn, urlsplit(url).path, {"jsonrpc": "2.0", "id": n, "method": "ping"},
                          {"mcp-protocol-version": "2025-11-25"})
            body = answer.read()
            statuses.append(answer.status)
            assert answer.status in (200, 503), body
            if answer.status == 503:
                assert b"dropped on purpose" in body
    dropped = [status == 503 for status in statuses]
    assert 25 <= sum(dropped) <= 75  # 25% of 200 is 50
    # The same seed draws the same requests: one draw per request, in arrival order.
    decider = Decider(parse_plan(drop="25%", seed="11"))
    assert dropped == [decider.drop(1.0) for _ in range(requests)]
    drops = [r for r in fault_records(log) if r["kind"] == "drop"]
    assert len(drops) == sum(dropped) and all(r["drop_as"] == "503" and r["method"] == "POST" for r in drops)


@pytest.mark.slow
def test_a_reset_drop_closes_the_connection_without_an_answer(tmp_path, stateless_json_server):
    log = tmp_path / "faults.jsonl"
    with fault_proxy(stateless_json_server.url, "--drop", "100%", "--fault-log", str(log)) as url:
        for n in range(3):
            conn = connection(url)
            with pytest.raises((ConnectionError, OSError)):  # RemoteDisconnected is a ConnectionError
                post(conn, urlsplit(url).path, {"jsonrpc": "2.0", "id": n, "method": "ping"})
            conn.close()
    assert [r["drop_as"] for r in fault_records(log)] == ["reset"] * 3


@pytest.mark.slow
def test_an_idle_connection_is_cut_and_a_delay_holds_requests_back(tmp_path, stateless_json_server):
    log = tmp_path / "faults.jsonl"
    with fault_proxy(stateless_json_server.url, "--idle-timeout", f"{CUT}s", "--delay", "300ms±100ms", "--seed", "1", "--fault-log", str(log)) as url:
        port = urlsplit(url).port
        with socket.create_connection(("127.0.0.1", port), timeout=STREAM_TIMEOUT) as idle:
            assert idle.recv(1) == b""  # the proxy closed it: nothing was ever sent
        conn = connection(url)
        for n in range(3):
            answer = post(conn, urlsplit(url).path, {"jsonrpc": "2.0", "id": n, "method": "ping"})
            answer.read()
            assert answer.status == 200
    # when the proxy cut and how long it held each request back, by its own record
    records = fault_records(log)
    assert [r["kind"] for r in records].count("cut-idle") >= 1 and records[0]["idle_s"] >= CUT
    delays = [r["delay_ms"] for r in records if r["kind"] == "delay"]
    assert len(delays) == 3 and all(200 <= d <= 400 for d in delays)


@pytest.mark.slow
def test_the_schedule_limits_drops_to_its_window(tmp_path, stateless_json_server):
    log = tmp_path / "faults.jsonl"
    with fault_proxy(stateless_json_server.url, "--drop", "100%", "--drop-as", "502", "--faults-from", "3s", "--faults-until", "4s", "--fault-log", str(log)) as url:
        conn = connection(url)
        seen: list[int] = []

        def ask() -> bool:  # true once a request passed after some were dropped
            answer = post(conn, urlsplit(url).path, {"jsonrpc": "2.0", "id": len(seen), "method": "ping"})
            answer.read()
            seen.append(answer.status)
            return 502 in seen and seen[-1] == 200

        wait_for(ask, what="requests passing, dropped, then passing again")
    first_drop = seen.index(502)
    assert first_drop > 0 and set(seen[:first_drop]) == {200}  # before the window: passed
    drops = fault_records(log)
    assert drops and all(3.0 <= r["elapsed"] < 4.0 for r in drops) and len(drops) == seen.count(502)


@pytest.mark.slow
def test_it_stacks_with_the_recorder_and_the_balancer(tmp_path, http_server):
    """One mitmdump: recorder, balancer and faults; a stream is cut, recorded as broken, and logged."""
    from mcpbench.lab.topology.cluster import mitmdump_path
    from mcpbench.proxies.balancer import __file__ as balancer_script
    from mcpbench.proxies.faults import __file__ as faults_script
    from mcpbench.record import ADDON_PATH
    from tests.support.servers import free_port, stop_process, wait_for_port

    log, trace = tmp_path / "faults.jsonl", tmp_path / "t.jsonl"
    one = http_server  # and a second instance behind the balancer
    with reference_server("streamable-http") as two:
        port = free_port()
        proc = subprocess.Popen([
            mitmdump_path(), "-q", "--mode", f"reverse:http://127.0.0.1:{one.port}", "--listen-host", "127.0.0.1", "-p", str(port),
            "--set", "connection_strategy=lazy",
            "-s", str(ADDON_PATH), "--set", f"mcpbench_out={trace}",
            "-s", balancer_script, "--set", f"mcpbench_balancer_instances=127.0.0.1:{one.port},127.0.0.1:{two.port}",
            "--set", "mcpbench_balancer_policy=sticky",
            "-s", faults_script, "--set", f"mcpbench_faults_cut_streams_after={CUT}s", "--set", f"mcpbench_faults_log={log}",
        ], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for_port("127.0.0.1", port, proc=proc)
            url = f"http://127.0.0.1:{port}/mcp"
            headers = initialize(url)
            conn, stream = start_stream_get(url, headers)
            assert stream.status == 200 and stream.getheader("x-mcpbench-instance") in ("s1", "s2")
            _, cut = read_until_closed(stream)
            assert cut
        finally:
            proc.terminate()
            proc.wait(30)
            stop_process(proc)
    assert [r["kind"] for r in fault_records(log)] == ["cut-stream"]
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert any(e.get("kind") == "stream" and e.get("event") == "error" for e in events)  # recorded as broken
    assert any(e.get("kind") == "message" and '"initialize"' in json.dumps(e) for e in events)


@pytest.mark.slow
def test_an_unused_proxy_stops_cleanly_on_sigterm(tmp_path, stateless_http_server):
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpbench", "faults", "--upstream", stateless_http_server.url, "--listen", "127.0.0.1:0", "--drop", "1%"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert read_first_line(proc).startswith("http://127.0.0.1:")
        proc.terminate()
        assert proc.wait(30) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_addon_decides_in_its_hooks(tmp_path):
    """The hooks alone (mitmproxy's test context): a 503 drop, a reset drop, SSE streamed, options checked."""
    import asyncio

    from mitmproxy.test import taddons, tflow, tutils

    from mcpbench.proxies.faults import DROP_BODY, Faults

    addon = Faults()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, mcpbench_faults_drop="100%", mcpbench_faults_drop_as="503", mcpbench_faults_log=str(tmp_path / "f.jsonl"))
        flow = tflow.tflow()
        asyncio.run(addon.request(flow))
        assert flow.response.status_code == 503 and flow.response.content == DROP_BODY
        tctx.configure(addon, mcpbench_faults_drop_as="reset")
        flow = tflow.tflow()
        asyncio.run(addon.request(flow))
        assert flow.response is None and flow.error is not None  # killed: never forwarded
        tctx.configure(addon, mcpbench_faults_drop="0")
        flow = tflow.tflow(resp=tutils.tresp())
        flow.response.headers["content-type"] = "text/event-stream"
        addon.responseheaders(flow)
        assert flow.response.stream is True
        tctx.configure(addon, mcpbench_faults_buffer_sse="true")
        flow = tflow.tflow(resp=tutils.tresp())
        flow.response.headers["content-type"] = "text/event-stream"
        addon.responseheaders(flow)
        assert flow.response.stream is False  # held whole until the stream ends
        with pytest.raises(Exception, match="--drop"):
            tctx.configure(addon, mcpbench_faults_drop="lots")
    records = fault_records(tmp_path / "f.jsonl")
    assert [r.get("drop_as") for r in records] == ["503", "reset", None] and records[-1]["kind"] == "buffer-sse"
