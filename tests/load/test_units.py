"""Scenario checking, thresholds, templates, the arrival schedule and trace-derived mixes (no processes)."""

import random
import subprocess
import sys

import orjson
import pytest

from mcpbench.load.openmodel import ArrivalSchedule
from mcpbench.load.samples import metric, summarize
from mcpbench.load.scenario import (
    Scenario,
    ScenarioError,
    Workload,
    compile_arguments,
    load_scenario,
    mix_from_trace,
    parse_threshold,
)
from mcpbench.protocol.errors import TargetError
from mcpbench.system.target import parse_target
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from tests.load.helpers import scenario_from_text
from tests.support.servers import REPO_ROOT, free_port
from tests.support.traces import event, header, write_trace

GOOD = """\
target: http://127.0.0.1:9/mcp
mix:
  - call: tools/call
    tool: echo
    arguments: {text: "{{string 10}}", n: "{{int 3 4}}"}
"""


def test_targets():
    assert parse_target("http://h:1/mcp").transport == STREAMABLE_HTTP
    sse = parse_target("sse+https://h/sse")
    assert (sse.transport, sse.url) == (LEGACY_SSE, "https://h/sse")
    stdio = parse_target("stdio:python -m srv --x 'a b'")
    assert (stdio.transport, stdio.argv) == (STDIO, ("python", "-m", "srv", "--x", "a b"))
    for bad in ("ftp://h", "stdio:", "", "h:1/mcp", "http:///mcp"):
        with pytest.raises(TargetError):
            parse_target(bad)


def test_scenario_roundtrip_and_templates():
    scenario = scenario_from_text(GOOD, "s.yaml")
    assert Scenario.from_json(orjson.loads(orjson.dumps(scenario.to_json()))) == scenario
    call, params = Workload(scenario.mix, random.Random(1)).next()
    assert call.step == "tools/call echo"
    assert len(params["arguments"]["text"]) == 10 and params["arguments"]["n"] in (3, 4)
    assert compile_arguments({"a": [1, "{{choice x y}}"]})(random.Random(0))["a"][1] in ("x", "y")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("tool: echo", "tol: echo"), "s.yaml:4: unknown key 'tol' in a mix entry (did you mean 'tool'?)"),
        (GOOD + "thinktime: 1\n", "s.yaml:6: unknown key 'thinktime' in the scenario (did you mean 'think_time'?)"),
        (GOOD.replace("http://", "gopher://"), "s.yaml:1: unknown transport scheme 'gopher'"),
        (GOOD.replace("tools/call", "tools/cal"), "s.yaml:3: unknown call 'tools/cal' (did you mean 'tools/call'?)"),
        (GOOD.replace("{{int 3 4}}", "{{int 4}}"), "s.yaml:5: template '{{int 4}}'"),
        (GOOD + "duration: 5 parsecs\n", "s.yaml:6: duration:"),
        (GOOD + "session: forever\n", "s.yaml:6: session: 'forever' is not a session mode"),
        (GOOD + "era: 1999-01-01\n", "s.yaml:6: era: unknown era '1999-01-01'"),
        (GOOD + "thresholds: ['p95 fast']\n", "s.yaml:6: thresholds: threshold 'p95 fast' not understood"),
        (GOOD + "input_responses:\n  sampling: ok\n  elicitation: 5\n", "s.yaml:8: input_responses elicitation: expected accept"),
        (GOOD + "input_responses:\n  roots: file:///tmp\n", "s.yaml:7: input_responses roots: expected a list"),
        (GOOD + "input_responses:\n  sampling: {model: x}\n", "s.yaml:7: input_responses sampling:"),
        (GOOD + "input_responses:\n  elicitation: {action: decline, content: {a: 1}}\n", "s.yaml:7: input_responses elicitation: content"),
        (GOOD + "input_responses:\n  elicitaton: decline\n", "s.yaml:7: unknown key 'elicitaton' in input_responses (did you mean 'elicitation'?)"),
        (GOOD + "input_responses:\n  think_time: [2, 1]\n", "s.yaml:7: input_responses think_time: [min, max]"),
        (GOOD + "max_rounds: 0\n", "s.yaml:6: max_rounds: must be a whole number >= 1"),
        (GOOD + "server_requests: {roots/list: refuse}\ninput_responses: {roots: []}\n",
         "s.yaml:7: roots/list is answered in both server_requests and input_responses"),
        (GOOD.replace("    tool: echo\n", "    tool: echo\n    as_task: yes please\n"), "s.yaml:5: as_task must be true or false"),
        (GOOD + "  - {call: tools/list, as_task: true}\n", "s.yaml:6: only tools/call runs as a task"),
        (GOOD + "  - {call: tools/list, progress: true}\n", "s.yaml:6: only tools/call asks for progress"),
        (GOOD.replace("    tool: echo\n", "    tool: echo\n    progress: 1\n"), "s.yaml:5: progress must be true or false"),
        (GOOD + "era: 2026-07-28\nlisten: [tools]\n", "s.yaml:7: listen: 'tools' is no listen type"),
        (GOOD + "listen: [toolsListChanged]\n", "s.yaml: listen holds a subscriptions/listen stream: it needs era 2026-07-28"),
    ],
)
def test_scenario_errors_name_the_line(text, expected):
    with pytest.raises(ScenarioError) as err:
        scenario_from_text(text, "s.yaml")
    assert str(err.value).startswith(expected) or expected in str(err.value)
    assert "\n" not in str(err.value)


def test_input_responses_by_kind_and_as_task_survive_the_trip_to_the_locust_processes():
    text = GOOD.replace("    tool: echo\n", "    tool: echo\n    as_task: true\n") + (
        "era: 2026-07-28\nmax_rounds: 3\ninput_responses:\n  elicitation: {action: accept, content: {answer: 'yes'}}\n"
        "  sampling: the text\n  roots: [file:///tmp, {uri: 'file:///srv', name: srv}]\n  think_time: [0.1, 0.2]\n")
    scenario = scenario_from_text(text, "s.yaml")
    assert scenario.input_responses == {
        "elicitation/create": {"action": "accept", "content": {"answer": "yes"}},
        "sampling/createMessage": {"role": "assistant", "content": {"type": "text", "text": "the text"}, "model": "mcpbench",
                                   "stopReason": "endTurn"},
        "roots/list": {"roots": [{"uri": "file:///tmp"}, {"uri": "file:///srv", "name": "srv"}]},
    }
    assert scenario.answer_think == (0.1, 0.2) and scenario.max_rounds == 3 and scenario.mix[0].as_task
    assert Scenario.from_json(orjson.loads(orjson.dumps(scenario.to_json()))) == scenario
    listening = scenario_from_text(GOOD + "era: [handshake, 2026-07-28]\nlisten: [toolsListChanged, {resourceSubscriptions: [a://b]}]\n", "s.yaml")
    assert listening.listen == (("toolsListChanged",), ("a://b",))
    assert Scenario.from_json(orjson.loads(orjson.dumps(listening.to_json()))) == listening
    declined = scenario_from_text(GOOD + "input_responses: {elicitation: decline}\n", "s.yaml")
    assert declined.input_responses == {"elicitation/create": {"action": "decline"}}


def test_a_call_that_asks_for_progress_carries_a_token_of_its_own_each_time():
    from mcpbench.load.templates import Workload

    scenario = scenario_from_text(GOOD.replace("    tool: echo\n", "    tool: echo\n    progress: true\n"), "s.yaml")
    assert scenario.mix[0].progress and Scenario.from_json(orjson.loads(orjson.dumps(scenario.to_json()))) == scenario
    workload = Workload(scenario.mix, random.Random(1))
    tokens = [workload.next()[1]["_meta"]["progressToken"] for _ in range(3)]
    assert len(set(tokens)) == 3
    assert "_meta" not in Workload(scenario_from_text(GOOD, "s.yaml").mix).next()[1]


def test_whole_operations_in_the_summary(tmp_path):
    path = tmp_path / "samples.jsonl"
    rows = [{"t": 1.0, "type": "streamable-http", "step": "tools/call ask", "latency_ms": 30.0 + i, "size": 1, "failure": None,
             "rounds": 2, "polls": 0, "wait_ms": 10.0, "rounds_ms": [12.0, 7.0], "asked": ["sampling/createMessage"]} for i in range(3)]
    rows.append({"t": 1.0, "type": "streamable-http", "step": "tools/call job", "latency_ms": 90.0, "size": 1, "failure": None,
                 "rounds": 1, "polls": 4, "wait_ms": 80.0})
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    summary = summarize(path, duration=1.0)
    ask, job = summary["steps"]
    assert ask["operation"] == {"count": 3, "rounds": 2.0, "max_rounds": 2, "polls": 0.0, "p50": 31.0,
                                "rounds_sum_p50": 19.0, "wait_p50": 10.0, "rest_p50": 2.0}
    assert job["operation"]["polls"] == 4.0 and job["operation"]["rounds_sum_p50"] is None
    assert summary["input_asked"] == ["sampling/createMessage"]
    from mcpbench.load.samples import render

    table = render(summary)
    assert "tools/call ask: 2.00 rounds and 0.00 polls a step; p50 31.0 ms" in table and "its rounds' sum 19.0 ms" in table
    assert "tools/call job: 1.00 rounds and 4.00 polls a step" in table


def test_a_wrong_typed_input_response_is_exit_2_naming_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD + "era: 2026-07-28\ninput_responses:\n  sampling: [1, 2]\n")
    run = subprocess.run([sys.executable, "-m", "mcpbench", "load", str(path)], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert run.returncode == 2 and f"{path}:8: input_responses sampling:" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_target_option_supplies_a_missing_target(tmp_path):
    """`--target` gives a scenario without `target:` its target, as well as overriding one."""
    path = tmp_path / "mix.yaml"
    path.write_text(GOOD.replace("target: http://127.0.0.1:9/mcp\n", ""))
    with pytest.raises(ScenarioError, match=r"mix\.yaml: no 'target'"):
        load_scenario(path)
    assert load_scenario(path, target="sse+http://127.0.0.1:9/sse").target == "sse+http://127.0.0.1:9/sse"
    legacy_2026 = tmp_path / "legacy-2026.yaml"  # the SDK speaks 2026-07-28 over legacy SSE: so does load
    legacy_2026.write_text(GOOD.replace("http://127.0.0.1:9/mcp", "sse+http://h/sse") + "era: 2026-07-28\n")
    assert load_scenario(legacy_2026).versions == ("2026-07-28",)
    port = free_port()  # nothing listens there: the run gets as far as reaching the target
    run = subprocess.run([sys.executable, "-m", "mcpbench", "load", str(path), "--target", f"http://127.0.0.1:{port}/mcp"],
                         capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert run.returncode == 3 and f"cannot reach http://127.0.0.1:{port}/mcp" in run.stderr, run.stderr


def test_thresholds():
    assert parse_threshold("p95 < 200ms").value == 200.0
    assert parse_threshold("avg <= 1.5s").value == 1500.0
    step = parse_threshold("tools/call echo p99 < 50ms")
    assert (step.step, step.metric) == ("tools/call echo", "p99")
    assert parse_threshold("fail_ratio < 0.01").check(0.0)
    assert not parse_threshold("rps > 100").check(50.0)


def test_summary_and_metrics(tmp_path):
    path = tmp_path / "samples.jsonl"
    rows = [{"t": 1.0 + i, "type": "stdio", "step": "ping", "latency_ms": float(i), "size": 1, "failure": None} for i in range(1, 101)]
    rows[0]["failure"] = "stream-closed"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    summary = summarize(path, duration=10.0)
    assert summary["total"]["count"] == 100 and summary["failure_classes"] == {"stream-closed": 1}
    assert metric(summary, "p50") == pytest.approx(50.5)
    assert metric(summary, "fail_ratio", "ping") == pytest.approx(0.01)
    assert metric(summary, "rps") == pytest.approx(10.0)
    assert metric(summary, "p95", "nope") is None


def test_the_summary_pass_gives_the_histograms_reading_the_samples_gives(tmp_path):
    from mcpbench.load import histograms

    path = tmp_path / "samples.jsonl"
    rng = random.Random(5)
    rows = [{"t": 1.0 + i / 100, "type": "stdio", "step": rng.choice(["ping", "tools/call echo"]), "latency_ms": rng.uniform(1, 30),
             "size": 1, "failure": "tool-error" if i % 17 == 0 else None} for i in range(600)]
    rows.insert(300, {"open": {"scheduled": 5}})  # not a step: left out of both
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    columns = histograms.Columns()
    summarize(path, columns=columns)
    one_pass, read = columns.steps(), histograms.from_samples(path)
    assert one_pass.keys() == read.keys() == {("stdio", "ping"), ("stdio", "tools/call echo")}
    for key, run in read.items():
        assert (one_pass[key].chunks == run.chunks).all() and (one_pass[key].fails == run.fails).all()
        assert one_pass[key].count == run.count and one_pass[key].slice_s == run.slice_s and run.chunks.shape[0] == 20


def test_arrival_schedule_counts_late_and_dropped():
    now = [100.0]
    schedule = ArrivalSchedule(10.0, max_lateness=0.5, clock=lambda: now[0])
    first = schedule.claim()
    assert first.intended == 100.0 and not schedule.started(first)
    assert schedule.claim().intended == pytest.approx(100.1)
    now[0] = 100.3  # slot 2 (100.2) is 0.1 s late
    slot = schedule.claim()
    assert schedule.started(slot) and schedule.late == 1
    now[0] = 102.0  # slots until 101.5 are more than 0.5 s late: dropped, not run
    slot = schedule.claim()
    assert slot.intended == pytest.approx(101.5) and schedule.dropped == 12


def test_mix_from_trace(tmp_path):
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "a"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "a"}, "_meta": {"x": 1}}},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "mcpbench://greeting"}},
        # A 2026-07-28 input round's retry: the same operation as id 2's, not a step of its own.
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "a"},
                                                                       "inputResponses": {"k": {}}, "requestState": "s"}},
    ]
    path = write_trace(tmp_path / "t.jsonl", [event(i, "s", "c2s", m) for i, m in enumerate(msgs)], header=header(ts=0))
    mix = {c.step: c for c in mix_from_trace(path)}
    assert set(mix) == {"tools/call echo", "resources/read"}
    assert mix["tools/call echo"].weight == 2.0 and mix["tools/call echo"].arguments == {"text": "a"}


def test_cli_process_never_imports_locust():
    code = (
        "import sys, mcpbench.cli, mcpbench.load, mcpbench.load.cli, mcpbench.load.runner, mcpbench.load.scenario, "
        "mcpbench.load.samples, mcpbench.load.worker, mcpbench.load.runfile, mcpbench.load.transit, mcpbench.system.target; print('locust' in sys.modules or 'gevent.monkey' in sys.modules and "
        "sys.modules['gevent.monkey'].is_anything_patched())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"
