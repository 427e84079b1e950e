"""`mcpbench bench soak` in its short mode: every message the users sent and received is in the traces, once."""

import orjson
import pytest

from mcpbench.bench import soak

pytestmark = pytest.mark.slow


def test_the_short_soak_loses_and_duplicates_nothing(tmp_path):
    config = dict(soak.QUICK, levels=[4])
    path = soak.run(quick=True, out_dir=tmp_path, config=config)
    assert path.with_suffix(".png").stat().st_size > 0
    data = orjson.loads(path.read_bytes())
    [level] = data["levels"]
    for name in soak.PATHS:
        figures = level["paths"][name]
        assert figures["steps"] > 0, name
        assert figures["unclassified"] == 0, (name, figures["failures"])
        assert figures["get_streams"] >= config["levels"][0], name  # every session held its GET stream
    direct = level["paths"]["direct"]
    assert "trace" not in direct and direct["unanswered"] == 0, direct["failure_details"]  # the control: no proxy
    traces = [level["paths"][name]["trace"] for name in soak.TRACED] + [level["throughput"]["record_trace"]]
    for trace in traces:
        assert trace["lost"]["total"] == 0, trace["examples"]
        assert trace["duplicated"]["total"] == 0, trace["examples"]
        assert trace["client"]["c2s"] > 0 and trace["client"]["s2c"] > 0
    faulty = level["paths"]["both"]
    assert level["faults_injected"] > 0
    assert faulty["reconnects"]["breaks"] > 0  # cut answer streams were resumed
    assert faulty["get_streams"] > level["paths"]["record"]["get_streams"]  # cut GET streams were reopened
    assert set(level["processes"]) == {"record", "balancer", "both.balancer", "both.record"}
    assert all(samples for samples in level["series"].values())
    shares = level["cpu"]["share_of_a_core"]  # what each process of the soak took: servers and users too
    assert {f"users.{name}" for name in soak.PATHS} | {"server.s1", "record"} <= set(shares), shares
    assert 0 < level["cpu"]["machine_busy"] <= 1 and level["cpu"]["cores"] >= 1
