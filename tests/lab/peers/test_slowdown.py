"""`lab serve --slow TOOL=SHARE`: parsing, and a slowed tool that keeps its signature and kind."""

import inspect
import subprocess
import sys

import anyio
import pytest

from mcpbench.lab.peers.slowdown import Slowdown, parse_slowdown, slowed
from tests.support.servers import REPO_ROOT


@pytest.mark.parametrize(("text", "want"), [
    ("slow=20%", Slowdown("slow", share=0.2)),
    ("echo=+5ms", Slowdown("echo", seconds=0.005)),
    ("big=0.5s", Slowdown("big", seconds=0.5)),
])
def test_specs_parse(text, want):
    assert parse_slowdown(text) == want


@pytest.mark.parametrize(("text", "says"), [
    ("slow", "expected TOOL=SHARE%"),
    ("slow=fast", "expected TOOL=SHARE%"),
    ("nope=20%", "no tool 'nope'"),
    ("echo=+11s", "at most 10 s"),
])
def test_bad_specs_say_why(text, says):
    with pytest.raises(ValueError, match=says):
        parse_slowdown(text)


def test_the_extra_delay_is_a_share_of_the_run_time_plus_a_fixed_part():
    assert Slowdown("slow", share=0.2).extra(0.05) == pytest.approx(0.01)
    assert Slowdown("echo", seconds=0.005).extra(0.0001) == pytest.approx(0.005)


def test_a_slowed_tool_keeps_its_signature_and_whether_it_is_async():
    calls = []

    def echo(text: str) -> str:
        calls.append(text)
        return text

    async def slow(seconds: float = 0.2) -> str:
        await anyio.sleep(seconds)
        return "slept"

    assert slowed(echo, None) is echo
    plain, waited = slowed(echo, Slowdown("echo", seconds=0.001)), slowed(slow, Slowdown("slow", share=0.1))
    assert inspect.signature(plain) == inspect.signature(echo) and not inspect.iscoroutinefunction(plain)
    assert inspect.signature(waited) == inspect.signature(slow) and inspect.iscoroutinefunction(waited)
    assert plain("hi") == "hi" and calls == ["hi"]
    assert anyio.run(waited, 0.0) == "slept"


def test_lab_serve_refuses_a_bad_slow_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "mcpbench", "lab", "serve", "--slow", "nope=20%"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "mcpbench: --slow 'nope=20%': no tool 'nope'; the reference server has echo, add, slow, fail, big, ask, toggle_tool"
