"""A stream whose server asked `retry: 500` is not reopened sooner than 500 ms after it was cut: the load
client's own record says which wait it used, and the server's log of request times agrees (real processes:
the resumable reference server, whose priming events carry `retry: 500`, behind the fault proxy)."""

import pytest

from mcpbench.lab.peers.reference_server import RESUME_RETRY_MS
from mcpbench.load.samples import records
from mcpbench.protocol.reconnect import ReconnectPolicy
from tests.support.faults import fault_proxy
from tests.support.load_client import Run
from tests.support.servers import reference_server

# Streams are cut this long after they open; `slow` runs past two cuts.
CUT = "300ms"
SLOW = {"seconds": 1.2, "steps": 6}


@pytest.mark.slow
def test_a_resume_waits_at_least_the_streams_retry_after_each_cut(tmp_path):
    requests, faults = tmp_path / "requests.jsonl", tmp_path / "faults.jsonl"
    with reference_server("streamable-http", resumable=True, extra_args=["--request-log", str(requests)]) as server, \
            fault_proxy(server.url, "--cut-streams-after", CUT, "--fault-log", str(faults)) as url:
        run = Run(url, ReconnectPolicy(mode="resume", backoff=0.01))
        (result,) = run.calls(("slow", SLOW))
    assert result is not None and result["content"][0]["text"].startswith("slept"), run.reconnects
    breaks = [r for r in run.reconnects if r["step"] == "tools/call slow"]
    assert breaks and all(r["action"] == "resume" and r["retry_ms"] == RESUME_RETRY_MS for r in breaks)
    waits = [wait for r in breaks for wait in r["waits_ms"]]
    assert waits and all(wait >= RESUME_RETRY_MS for wait in waits)
    cuts = sorted(e["t"] for e in records(faults) if e["kind"] == "cut-stream")
    resumes = sorted(e["t"] for e in records(requests) if e["method"] == "GET" and e.get("last_event_id"))
    assert len(resumes) == len(waits)
    for resumed in resumes:  # the server saw each resume at least retry after the cut before it
        cut = max(t for t in cuts if t < resumed)
        assert resumed - cut >= RESUME_RETRY_MS / 1000, (cuts, resumes)
