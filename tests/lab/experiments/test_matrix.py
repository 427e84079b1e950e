"""The one matrix loader of the lab's experiments (lab/experiments/matrix.py), through both experiments."""

import pytest
import yaml

from mcpbench.lab.experiments import reconnect, sticky
from mcpbench.lab.experiments.matrix import PLACEHOLDER_TARGET, Matrix
from mcpbench.load.scenario import ScenarioError

MIX = "mix:\n  - {call: tools/call, tool: echo, arguments: {text: hi}}\n"


def test_the_lists_come_out_and_the_rest_is_each_cells_load_scenario():
    matrix = Matrix.read(yaml.compose("users: 2\nmodes: stateless\n" + MIX), "s.yaml", "sticky", ("modes", "policies"), shape="…")
    assert matrix.items("modes") == ["stateless"]  # a single value: a list of one
    assert matrix.items("policies") is None
    assert matrix.where("modes") == "s.yaml:2"
    scenario = matrix.scenario("session_per_task")
    assert (scenario.target, scenario.session, scenario.users) == (PLACEHOLDER_TARGET, "session_per_task", 2)


@pytest.mark.parametrize(("kind", "session"), [(sticky, "session_per_task"), (reconnect, "long_lived")])
def test_each_experiment_sets_target_and_session_for_its_cells(kind, session):
    text = MIX + ("faults: {cut: {cut_streams_after: 1s}}\n" if kind is reconnect else "")
    plan = kind.plan_from_node(yaml.compose(text), "s.yaml")
    assert (plan.scenario.target, plan.scenario.session) == (PLACEHOLDER_TARGET, session)


@pytest.mark.parametrize(
    ("kind", "text", "said"),
    [
        (sticky, "modes: [stateless]\nsession: long_lived\n" + MIX, r"^s\.yaml:2: a sticky scenario sets no 'session': the lab sets it"),
        (reconnect, "faults: {cut: {cut_streams_after: 1s}}\ntarget: http://x/mcp\n" + MIX,
         r"^s\.yaml:2: a reconnect scenario sets no 'target': the lab sets it"),
        (reconnect, "faults: {cut: {cut_streams_after: 1s}}\ntransports: [carrier-pigeon]\n" + MIX,
         r"^s\.yaml:2: transports: expected some of streamable-http, sse, stdio, each once"),
        (reconnect, "faults: {cut: {cut_streams_after: 1s}}\nwindow: [9s, 2s]\n" + MIX, r"^s\.yaml:2: window: the start must come before"),
        (reconnect, "policies: [none]\n" + MIX, r"^s\.yaml: a reconnect scenario names its faults"),
        (reconnect, "- a list\n", r"^s\.yaml: a reconnect scenario is a mapping \(transports, faults"),
        (sticky, "modes: [stateless]\nmodes: [stateless]\n" + MIX, r"^s\.yaml:2: key 'modes' given twice in the lab's lists"),
    ],
)
def test_a_bad_lab_scenario_is_one_error_naming_file_and_line(kind, text, said):
    with pytest.raises(ScenarioError, match=said):
        kind.plan_from_node(yaml.compose(text), "s.yaml")


def test_a_reconnect_scenario_over_two_eras_has_cells_for_each_the_newest_labelled():
    text = MIX + "faults: {cut: {cut_streams_after: 1s}}\ntransports: [streamable-http, sse]\npolicies: [none, resume]\n" \
                 "era: [handshake, 2026-07-28]\nsdk_client: true\n"
    plan = reconnect.plan_from_node(yaml.compose(text), "s.yaml")
    assert [cell.slug for cell in plan.cells] == [
        "streamable-http-cut-none", "streamable-http-cut-resume", "streamable-http-cut-none@2026-07-28",
        "streamable-http-cut-resume@2026-07-28", "streamable-http-cut-sdk",
        "sse-cut-none", "sse-cut-resume", "sse-cut-none@2026-07-28", "sse-cut-resume@2026-07-28", "sse-cut-sdk"]
    one_era = reconnect.plan_from_node(yaml.compose(MIX + "faults: {cut: {cut_streams_after: 1s}}\n"), "s.yaml")
    assert {cell.version for cell in one_era.cells} == {None} and "@" not in one_era.cells[0].slug
