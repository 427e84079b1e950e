"""The plugin is registered through the `pytest11` entry point and does nothing a test does not ask for."""

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from tests.testing.helpers import run


def test_registered_as_a_pytest11_entry_point():
    found = {point.name: point.value for point in entry_points(group="pytest11")}
    assert found.get("mcpbench") == "mcpbench.testing.plugin"


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_loaded_without_being_named_its_option_and_marker_present(pytester):
    run(pytester, "--markers").stdout.fnmatch_lines(["@pytest.mark.mcp_trace(*"])
    run(pytester, "--help").stdout.fnmatch_lines(["*--mcp-record-mode={none,once,new_episodes,all}*"])


def test_an_unknown_record_mode_is_a_usage_error(pytester):
    pytester.makepyfile("def test_nothing(): pass")
    result = run(pytester, "--mcp-record-mode=sometimes")
    assert result.ret == 4  # pytest's usage error
    result.stderr.fnmatch_lines(["*--mcp-record-mode: invalid choice: 'sometimes'*"])


def test_idle_unless_used(pytester):
    """A suite that uses none of its fixtures runs as before, and the plugin imports nothing heavy."""
    pytester.makepyfile("def test_nothing(): pass")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["plugins: *mcpbench-*"])  # no -p: the entry point loaded it
    code = ("import sys, mcpbench.testing.plugin; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mitmproxy', 'locust') "
            "or m.startswith('mcpbench.replay')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
