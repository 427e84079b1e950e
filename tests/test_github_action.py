"""The composite GitHub Action (.github/actions/replay/action.yml), its steps run as the runner runs them.

Each `run:` step is written to a file and run with `bash --noprofile --norc -eo pipefail FILE` (what
`shell: bash` means on a runner), in a workspace with the traces, its `env:` expressions filled in
from the inputs (the action's defaults, then the test's), and `GITHUB_OUTPUT` and
`GITHUB_STEP_SUMMARY` as files. mcpbench is already installed here: `install` is empty.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml

from tests.support.servers import REPO_ROOT
from tests.testing.helpers import REFERENCE, VARIANT

ACTION = REPO_ROOT / ".github" / "actions" / "replay" / "action.yml"
EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")
STEP_TIMEOUT = 120.0


def run_action(workspace: Path, inputs: dict[str, str]) -> tuple[list[subprocess.CompletedProcess], dict[str, str], str]:
    """Run the action's steps until one fails; (their results, the step outputs, the job summary)."""
    action = yaml.safe_load(ACTION.read_text())
    values = {f"inputs.{name}": str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    values["github.action_path"] = str(ACTION.parent)
    values.update({f"inputs.{name}": value for name, value in inputs.items()})
    output, summary = workspace / "github_output", workspace / "step_summary"
    output.write_text("")
    summary.write_text("")
    base = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}
    results = []
    for number, step in enumerate(action["runs"]["steps"]):
        assert step["shell"] == "bash" and "uses" not in step
        env = {name: EXPRESSION.sub(lambda m: values[m.group(1)], str(value)) for name, value in step.get("env", {}).items()}
        script = workspace / f"step-{number}.sh"
        script.write_text(step["run"])
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workspace,
                              env={**base, **env}, capture_output=True, text=True, timeout=STEP_TIMEOUT)
        results.append(done)
        if done.returncode:
            break
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return results, outputs, summary.read_text()


@pytest.fixture
def workspace(tmp_path, recordings) -> Path:
    traces = tmp_path / "tests" / "mcp_traces"
    traces.mkdir(parents=True)
    for era, path in recordings.items():
        shutil.copy(path, traces / f"{era}.jsonl")
    return tmp_path


def server_command(target: str) -> str:
    return target.removeprefix("stdio:")


def test_the_action_is_composite_and_its_inputs_are_documented():
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    assert all(spec.get("description") for spec in action["inputs"].values())
    assert {"traces", "server", "target", "junit-xml", "summary-md", "contract", "fail-on"} <= set(action["inputs"])


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_a_folder_of_traces_replays_with_junit_and_the_job_summary(workspace):
    results, outputs, summary = run_action(workspace, {"install": "", "server": server_command(REFERENCE)})
    assert [r.returncode for r in results] == [0, 0], [r.stdout + r.stderr for r in results]
    assert results[0].stdout.startswith("mcpbench, version")
    assert outputs["exit-code"] == "0"
    root = ElementTree.fromstring((workspace / "mcpbench-replay.xml").read_bytes())
    assert (root.get("tests"), root.get("failures")) == ("2", "0")
    assert "| ✅ | `tests/mcp_traces/auto.jsonl` |" in summary


@pytest.mark.slow
def test_a_changed_server_fails_the_step_with_the_changes_in_the_summary(workspace):
    results, outputs, summary = run_action(workspace, {"install": "", "server": server_command(VARIANT),
                                                       "junit-xml": "out/r.xml", "summary-md": "out/r.md"})
    assert results[-1].returncode == 1 and outputs["exit-code"] == "1"
    assert ElementTree.fromstring((workspace / "out" / "r.xml").read_bytes()).get("failures") == "2"
    assert "result.content[0].text" in summary and summary == (workspace / "out" / "r.md").read_text()


@pytest.mark.slow
def test_contract_mode_and_a_glob(workspace):
    results, outputs, summary = run_action(workspace, {"install": "", "target": REFERENCE, "contract": "true",
                                                       "traces": "tests/mcp_traces/*.jsonl"})
    assert results[-1].returncode == 0, results[-1].stdout + results[-1].stderr
    assert "### mcpbench contract" in summary


def test_without_a_server_the_step_says_so(workspace):
    results, outputs, _ = run_action(workspace, {"install": ""})
    assert results[-1].returncode == 2
    assert "::error::mcpbench replay: give the server command (server) or a target" in results[-1].stdout
