"""`mcpbench bench soak` in its short mode: every message the users sent and received is in the traces, once;
the paths run in turn, each with the machine to itself."""

import orjson
import pytest

from mcpbench.bench import soak

pytestmark = pytest.mark.slow


# The control and the path with every part (record in front of the balancer that cuts streams), in
# turn: the other two are each a part of `both` (`bench soak --quick` runs all four).
PATHS = ("direct", "both")


@pytest.mark.timeout(240)  # two paths in turn, each with a Locust process's start-up, at a load of 15
def test_the_short_soak_loses_and_duplicates_nothing(tmp_path):
    config = dict(soak.QUICK, levels=[4], soak_s=8, paths=PATHS)  # 8 s each is enough for cuts and resumes
    path = soak.run(quick=True, out_dir=tmp_path, config=config)
    assert path.with_suffix(".png").stat().st_size > 0
    data = orjson.loads(path.read_bytes())
    [level] = data["levels"]
    assert level["ran"] == "in turn" and tuple(level["paths"]) == PATHS
    for name in PATHS:
        figures = level["paths"][name]
        assert figures["steps"] > 0, name
        assert figures["unclassified"] == 0, (name, figures["failures"])
        assert figures["get_streams"] >= config["levels"][0], name  # every session held its GET stream
        assert figures["cpu"]["seconds"] > 0 and f"users.{name}" in figures["cpu"]["share_of_a_core"], name  # its own window
        assert not any(other in figures["cpu"]["share_of_a_core"] for other in {f"users.{p}" for p in PATHS} - {f"users.{name}"})
        assert all(call["kind"] and call["detail"] for call in figures["failed_calls"]), name
    direct = level["paths"]["direct"]
    assert "trace" not in direct and direct["unanswered"] == 0, direct["failure_details"]  # the control: no proxy
    traces = [level["paths"]["both"]["trace"], level["throughput"]["record_trace"]]
    for trace in traces:
        assert trace["lost"]["total"] == 0, trace["examples"]
        assert trace["duplicated"]["total"] == 0, trace["examples"]
        assert trace["client"]["c2s"] > 0 and trace["client"]["s2c"] > 0
    faulty = level["paths"]["both"]
    assert level["faults_injected"] > 0
    assert faulty["reconnects"]["breaks"] > 0  # cut answer streams were resumed
    assert faulty["get_streams"] > level["paths"]["direct"]["get_streams"]  # cut GET streams were reopened
    assert set(level["processes"]) == {"both.balancer", "both.record"}
    assert all(samples for samples in level["series"].values())
    shares = level["cpu"]["share_of_a_core"]  # what each process of the soak took: servers and users too
    assert {f"users.{name}" for name in PATHS} | {"server.s1", "server.s4", "both.record"} <= set(shares), shares
    assert 0 < level["cpu"]["machine_busy"] <= 1 and level["cpu"]["cores"] >= 1
