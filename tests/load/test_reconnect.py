"""Reconnect policies under injected faults: one cut, one restart, one drop share (real processes).

The load users' client (`McpClient`) runs in a greenlet against the lab (the reference server behind
the builtin balancer, which injects the faults); each break leaves one reconnect record.
"""

import sys
import threading

import pytest

from mcpbench.lab.topology.cluster import RestartPlan, running_lab
from mcpbench.protocol.asks import Canned
from mcpbench.protocol.http import Failure
from mcpbench.protocol.reconnect import ReconnectPolicy
from mcpbench.system.target import Target
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.protocol.versions import V2026_07_28
from tests.support.load_client import TIMEOUT, Run

# The balancer cuts every SSE stream this long after it began; `slow` runs longer, `echo` far shorter.
CUT = "1s"
SLOW = {"seconds": 1.6, "steps": 8}
# A restart far in the future: the lab then has a restarter, which the test calls by hand.
MANUAL = RestartPlan(at=3600.0)
# A call's bound in the reply test (short: a lost reply's call waits it out).
BOUND = 5.0


@pytest.fixture(scope="module")
def cutting_lab(tmp_path_factory):
    with running_lab(1, STREAMABLE_HTTP, policy="round-robin", folder=tmp_path_factory.mktemp("cut"), resumable=True,
                     faults={"cut_streams_after": CUT}) as lab:
        yield lab


@pytest.mark.slow
def test_none_fails_every_call_after_a_cut(cutting_lab):
    run = Run(cutting_lab.url, ReconnectPolicy(mode="none"))
    results = run.calls(("slow", SLOW), ("echo", {"text": "a"}), ("echo", {"text": "b"}))
    assert results == [None, None, None]
    assert run.failures("tools/call slow") == [Failure.STREAM_CLOSED]
    assert run.failures("tools/call echo") == [Failure.STREAM_CLOSED] * 2
    (record,) = run.reconnects
    assert record["action"] == "none" and not record["ok"] and record["lost"] == 1


@pytest.mark.slow
def test_reinitialize_recovers_in_a_handshake_and_loses_the_cut_answer(cutting_lab):
    run = Run(cutting_lab.url, ReconnectPolicy(mode="reinitialize", backoff=0.01))
    results = run.calls(("slow", SLOW), ("echo", {"text": "after"}))
    assert results[0] is None and results[1]["content"][0]["text"] == "after"
    (record,) = run.reconnects
    assert record["action"] == "reinitialize" and record["ok"] and record["recover_ms"] > 0
    assert (record["lost"], record["uncertain"], record["resent"], record["duplicated"]) == (1, 1, 0, 0)
    assert record["new_session"] != record["session"]
    assert run.failures("initialize") == [None, None]


@pytest.mark.slow
def test_resume_loses_nothing_and_duplicates_nothing(cutting_lab):
    run = Run(cutting_lab.url, ReconnectPolicy(mode="resume"))
    results = run.calls(("slow", SLOW), ("echo", {"text": "after"}))
    assert results[0] is not None, (run.reconnects, run.steps)
    assert results[0]["content"][0]["text"].startswith("slept") and results[1]["content"][0]["text"] == "after"
    (record,) = run.reconnects
    assert record["action"] == "resume" and record["ok"] and record["recovered"] == 1
    assert (record["lost"], record["duplicated"], record["resent"]) == (0, 0, 0)
    assert run.failures("tools/call slow") == [None] and run.failures("initialize") == [None]


@pytest.mark.slow
def test_2026_07_28_reissues_a_cut_call_with_a_new_id_and_a_proxy_that_cuts_every_stream_loses_it(cutting_lab):
    """No session, no Last-Event-ID: the cut call goes again with a new id; behind a proxy that cuts
    every stream before `slow` ends, each reissue is cut too, and the call is lost within the attempts.
    (The call asks for progress: without, the SDK answers 2026-07-28 in one JSON body, no stream to cut.)"""
    run = Run(cutting_lab.url, ReconnectPolicy(mode="resume", attempts=2, backoff=0.01), version=V2026_07_28)
    results = run.calls(("slow", SLOW, {"progressToken": "p"}), ("echo", {"text": "after"}))
    assert results[0] is None and results[1]["content"][0]["text"] == "after"
    (record,) = run.reconnects
    assert record["action"] == "reissue" and not record["ok"] and record["resent"] == 2 and record["lost"] == 1
    assert len(set(record["ids"])) == 3 and None not in record["ids"], record  # each reissue a new id
    assert "reissued 2 times with a new id" in str(run.steps[0]["exception"])


@pytest.fixture(scope="module")
def restarting_lab(tmp_path_factory):
    """One instance the tests restart by hand (`restart_under_the_second_call`)."""
    with running_lab(1, STREAMABLE_HTTP, policy="round-robin", folder=tmp_path_factory.mktemp("restart"), resumable=True,
                     restarts=MANUAL) as lab:
        yield lab


def restart_under_the_second_call(lab, run: Run, seconds: float, at: float, down: float = 0.0) -> list:
    """`echo`, `slow` (`seconds` long, the instance restarted `at` seconds into it), `echo`: the results.
    `down`: the instance is killed at `at` and started again `down` seconds later (the fault's length)."""
    restarted = threading.Event()

    def start_again():
        lab.restarter.restart(0)
        restarted.set()

    def kill():
        lab.instances[0].proc.kill()
        threading.Timer(down, start_again).start()

    def restart(index):
        if index == 1:
            threading.Timer(at, kill if down else start_again).start()

    results = run.calls(("echo", {"text": "before"}), ("slow", {"seconds": seconds, "steps": 3}),
                        ("echo", {"text": "after"}), before=restart)
    assert restarted.wait(TIMEOUT)
    return results


@pytest.mark.slow
def test_after_a_restart_resume_falls_back_to_reinitialize(restarting_lab):
    """A restart while `slow` runs: the stream dies with the process, the resumed stream finds no
    session (404), and the client starts a new one. Not idempotent: uncertain; idempotent: re-sent."""
    runs = []
    for idempotent in (frozenset(), frozenset({"slow"})):
        policy = ReconnectPolicy(mode="resume", attempts=40, backoff=0.05, max_backoff=0.5, budget_floor=100,
                                 idempotent=idempotent)
        run = Run(restarting_lab.url, policy)
        runs.append((run, restart_under_the_second_call(restarting_lab, run, 3.0, 0.8)))
    (plain, plain_results), (again, again_results) = runs
    assert plain_results[1] is None and plain_results[2]["content"][0]["text"] == "after"
    (record,) = plain.reconnects
    assert record["action"] == "reinitialize" and record["ok"] and record["attempts"] >= 1
    assert (record["lost"], record["uncertain"], record["resent"]) == (1, 1, 0)
    assert again_results[1]["content"][0]["text"].startswith("slept") and again_results[2] is not None
    (record,) = again.reconnects
    assert record["action"] == "reinitialize" and (record["lost"], record["uncertain"], record["resent"]) == (0, 0, 1)


@pytest.mark.slow
def test_2026_07_28_answers_a_call_cut_by_a_restart_after_a_reissue_and_none_loses_it(restarting_lab):
    """The instance is down 1.5 s and more under `slow`: its answer's connection breaks (the balancer's
    502); the reissues (each a new id) find no server (502, connect refused) for longer than the first
    `attempts` backoffs last (20 + 40 + … + 640 ms at most), and go on as a failed re-handshake would
    until the new process listens, then are answered. The control, `none`, loses the call and sends
    nothing more."""
    runs = []
    for mode in ("resume", "none"):
        policy = ReconnectPolicy(mode=mode, attempts=6, backoff=0.02, max_backoff=1.0, budget_floor=100)
        run = Run(restarting_lab.url, policy, version=V2026_07_28)
        runs.append((run, restart_under_the_second_call(restarting_lab, run, 1.5, 0.5, down=1.5)))
    (reissued, results), (control, lost) = runs
    assert results[1] is not None, reissued.reconnects
    assert results[1]["content"][0]["text"].startswith("slept") and results[2]["content"][0]["text"] == "after"
    (record,) = reissued.reconnects
    assert record["action"] == "reissue" and record["ok"] and record["recovered"] == 1 and record["lost"] == 0
    assert record["resent"] > policy.attempts, record  # more sends than `attempts`: it waited for the server
    assert len(set(record["ids"])) == len(record["ids"]) == 1 + record["resent"]  # each send a new id
    assert reissued.failures("tools/call slow") == [None]
    assert lost[0] is not None and lost[1] is None and lost[2] is None
    (record,) = control.reconnects
    assert record["action"] == "none" and record["lost"] == 1 and record["resent"] == 0


@pytest.mark.slow
def test_2026_07_28_reissues_on_a_new_stdio_process(tmp_path):
    """stdio: the server is killed after a few messages (no handshake: calls only); the call that
    died with it is reissued, with a new id, on a new process, whatever its tool."""
    server = [sys.executable, "-m", "mcpbench", "lab", "serve", "--transport", "stdio"]
    wrapper = [sys.executable, "-m", "mcpbench", "faults", "stdio", "--kill-after-messages", "4", "--", *server]
    run = Run(Target(STDIO, argv=tuple(wrapper)), ReconnectPolicy(mode="reinitialize", backoff=0.01, budget_floor=50),
              version=V2026_07_28)
    results = run.calls(*[("echo", {"text": str(i)}) for i in range(4)])
    assert [r["content"][0]["text"] for r in results] == [str(i) for i in range(4)], run.steps
    assert run.reconnects and all(r["action"] == "reissue" and r["ok"] and r["uncertain"] == 0 for r in run.reconnects)
    assert all(r["new_session"] != r["session"] for r in run.reconnects)  # a new process each time
    assert "initialize" not in {s["name"] for s in run.steps}


@pytest.mark.slow
def test_a_drop_share_is_retried_within_the_budget(tmp_path):
    policy = ReconnectPolicy(mode="reinitialize", budget=0.1, budget_floor=2, budget_per_s=0.0, backoff=0.0, max_backoff=0.0,
                             idempotent=frozenset({"echo"}))
    faults = {"drop": "30%", "drop_as": "503", "seed": "5"}
    with running_lab(1, STREAMABLE_HTTP, policy="round-robin", folder=tmp_path, faults=faults) as lab:
        run = Run(lab.url, policy)
        results = run.calls(*[("echo", {"text": str(i)}) for i in range(40)])
    retries = [r for r in run.reconnects if r["action"] == "retry"]
    assert len(retries) >= 5, run.reconnects
    recovery = run.client.recovery
    assert recovery.extra <= policy.budget_floor + policy.budget * (recovery.requests - recovery.extra)
    assert sum(r["resent"] for r in retries) == recovery.extra >= 1
    assert sum(r["budget_denied"] for r in retries) >= 1  # 30 % drops outrun a 10 % budget
    assert sum(1 for r in results if r is not None) > 20


@pytest.mark.slow
def test_the_same_policy_recovers_a_cut_legacy_stream(tmp_path):
    """Legacy SSE: the session's one stream is cut under a call; reinitialize opens a new stream
    and handshake, and re-sends the idempotent call (resume falls back: the stream had no ids)."""
    with running_lab(1, LEGACY_SSE, policy="round-robin", folder=tmp_path, faults={"cut_streams_after": CUT}) as lab:
        run = Run(Target(LEGACY_SSE, url=lab.url), ReconnectPolicy(mode="resume", backoff=0.01, idempotent=frozenset({"slow"})))
        results = run.calls(("slow", {"seconds": 0.6, "steps": 2}), ("slow", {"seconds": 0.6, "steps": 2}))
        # 2026-07-28 over the same stream: no session to start again; a new stream, the call reissued with a new id
        reissued = Run(Target(LEGACY_SSE, url=lab.url), ReconnectPolicy(mode="resume", backoff=0.01), version=V2026_07_28)
        again = reissued.calls(("slow", {"seconds": 0.6, "steps": 2}), ("slow", {"seconds": 0.6, "steps": 2}))
    record = run.reconnects[0]
    assert record["action"] == "reinitialize" and record["ok"] and record["resent"] == 1 and record["lost"] == 0
    assert all(r is not None for r in results), run.steps
    assert run.failures("connect").count(None) >= 2  # a second stream was opened
    record = reissued.reconnects[0]
    assert record["action"] == "reissue" and record["ok"] and record["lost"] == 0 and len(set(record["ids"])) == 2
    assert all(r is not None for r in again) and reissued.failures("connect").count(None) >= 2, reissued.steps


@pytest.mark.slow
def test_the_same_policy_recovers_a_killed_stdio_server(tmp_path):
    """stdio: the server is killed after a few messages; reinitialize starts it again."""
    server = [sys.executable, "-m", "mcpbench", "lab", "serve", "--transport", "stdio"]
    wrapper = [sys.executable, "-m", "mcpbench", "faults", "stdio", "--kill-after-messages", "6", "--", *server]
    run = Run(Target(STDIO, argv=tuple(wrapper)), ReconnectPolicy(mode="reinitialize", backoff=0.01, budget_floor=50,
                                                    idempotent=frozenset({"echo"})))
    # Each process answers one call and is killed under the next: three calls, two kills (a process the
    # policy started is killed and started again too); each more call was one more cold start (2-3 s).
    results = run.calls(*[("echo", {"text": str(i)}) for i in range(3)])
    assert [r["content"][0]["text"] for r in results] == [str(i) for i in range(3)], run.steps
    assert len(run.reconnects) >= 2 and all(r["action"] == "reinitialize" and r["ok"] for r in run.reconnects)
    assert run.failures("initialize").count(None) == 1 + len(run.reconnects)


@pytest.mark.slow
def test_a_handshake_whose_connection_broke_goes_again_under_the_policy(tmp_path):
    """The soak's lost handshakes: an `initialize` whose answer was lost (here its connection reset;
    there its answer stream cut) is recovered as a call's break is, and reported once, with its final
    outcome. One that cannot be (its retry lost too) fails saying what the recovery did."""
    # Seed 160 drops the first three requests and none of the next five: the first handshake and its
    # one retry, then the second handshake; its retry, notifications/initialized, the call and DELETE pass.
    faults = {"drop": "50%", "drop_as": "reset", "seed": "160"}
    with running_lab(1, STREAMABLE_HTTP, policy="round-robin", folder=tmp_path, faults=faults) as lab:
        run = Run(lab.url, ReconnectPolicy(mode="resume", attempts=1, backoff=0.01))
        results = run.calls(("echo", {"text": "after"}))
    assert results[0]["content"][0]["text"] == "after"
    first, second = [s for s in run.steps if s["name"] == "initialize"]
    assert first["exception"].kind in (Failure.CONNECT, Failure.STREAM_CLOSED)
    assert str(first["exception"]).endswith("(1 new session tried, none started)"), first["exception"]
    assert second["exception"] is None  # the retried handshake: one step, answered
    assert [(r["step"], r["action"], r["ok"], r["resent"], r["attempts"]) for r in run.reconnects] == [
        ("initialize", "reinitialize", False, 1, 1), ("initialize", "reinitialize", True, 1, 1)]
    assert run.failures("notifications/initialized") == [None]


@pytest.mark.slow
def test_a_reply_to_the_servers_request_that_was_not_delivered_goes_again_and_a_lost_one_says_so(tmp_path):
    """Item 39.7's race: a proxy answered the reply to an elicitation with a 502 (its upstream had closed
    the idle connection the reply went on), the server waited for the reply, and the call hung until
    its time ran out, said to be unanswered. The reply now goes once more; a call whose reply could not
    be delivered twice fails as what failed, saying which reply it was."""
    # Seed 457 (50 %, the balancer's own 502): initialize, notifications/initialized and the first call
    # pass, its reply is refused and passes the second time; the second call passes, its reply is
    # refused twice; DELETE passes.
    faults = {"drop": "50%", "drop_as": "502", "seed": "457"}
    asks = Canned({"elicitation/create": {"action": "accept", "content": {"answer": "42"}}})
    with running_lab(1, STREAMABLE_HTTP, policy="round-robin", folder=tmp_path, faults=faults) as lab:
        run = Run(lab.url, None, asks=asks, timeout=BOUND)
        first, second = run.calls(("ask", {"question": "one"}), ("ask", {"question": "two"}))
    assert first is not None and first["content"][0]["text"] == "42", run.steps
    (failed,) = [s["exception"] for s in run.steps if s["exception"] is not None]
    assert second is None and failed.kind == Failure.HTTP_5XX, failed
    assert "the reply to the server's elicitation/create was not delivered: http-5xx: HTTP 502" in str(failed), failed


@pytest.mark.slow
def test_a_resume_that_meets_the_answer_resumes_again_from_the_last_message_not_the_priming_event(tmp_path):
    """The server answers while the resumed stream's replay runs: the SDK stores the answer but sends it
    on no stream, then primes the resumed stream with a newer id. The balancer cuts the resumed stream
    too; resumed again from that priming id, the answer would never come (the call timed out after its
    30 s in the soak while the server had answered in 1.5 s). Resumed from the last message's id, the
    answer is replayed.

    Timeline (s): the POST cut at 2.5 (its priming id in), resumed at ~3.0; the replay is held open
    until ~4.5 and the answer comes at 3.7 inside it; the resumed stream, primed at ~4.5, is cut at ~5.5
    and resumed once more."""
    from mcpbench.lab.peers.quirks import Quirks

    with running_lab(1, STREAMABLE_HTTP, policy="round-robin", folder=tmp_path, resumable=True,
                     faults={"cut_streams_after": "2.5s"}, quirks=Quirks(replay_pause=1.5)) as lab:
        run = Run(lab.url, ReconnectPolicy(mode="resume", backoff=0.01), timeout=12.0)
        [result] = run.calls(("slow", {"seconds": 3.7, "steps": 1}))
    assert result is not None, (run.reconnects, [(s["name"], str(s["exception"])) for s in run.steps])
    assert result["content"][0]["text"].startswith("slept")
    (record,) = run.reconnects
    assert record["action"] == "resume" and record["ok"] and record["recovered"] == 1, record
    assert record["attempts"] == 2, record  # the first resume met the answer in its replay, the second brought it


@pytest.mark.slow
def test_a_recorders_502_for_an_upstream_that_closed_is_retried_like_a_bare_one(tmp_path):
    """`mcpbench record` answers a request whose upstream closed the connection before answering
    with 502 and a JSON-RPC error under the request's id (the soak's `both` path: record in front of
    a balancer). That is a dropped request, as a bare 502 is: an idempotent call goes again (once:
    dropped twice, it fails saying it was sent again)."""
    from tests.record.helpers import record_proxy

    policy = ReconnectPolicy(mode="resume", backoff=0.0, max_backoff=0.0, budget_floor=100, idempotent=frozenset({"echo"}))
    faults = {"drop": "30%", "drop_as": "reset", "seed": "5"}
    with running_lab(1, STREAMABLE_HTTP, policy="round-robin", folder=tmp_path, faults=faults) as lab:
        with record_proxy(lab.url, tmp_path / "trace.jsonl") as (url, _proc):
            run = Run(url, policy)
            results = run.calls(*[("echo", {"text": str(i)}) for i in range(12)])
    retries = [r for r in run.reconnects if r["action"] == "retry" and r["step"] == "tools/call echo"]
    assert len(retries) >= 3 and all(r["resent"] == 1 and "HTTP 502: JSON-RPC -32603" in r["detail"] for r in retries), retries
    failures = [str(s["exception"]) for s in run.steps if s["exception"] is not None and s["name"] == "tools/call echo"]
    assert all(failure.endswith("(sent again)") for failure in failures), failures
    assert sum(result is not None for result in results) == 12 - len(failures) >= 12 - sum(not r["ok"] for r in retries)
