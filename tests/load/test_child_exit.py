"""A Locust child that fails on its own is reported as what it is: its exit status and last line, exit 3,
never as a stop signal nobody sent."""

import signal

import pytest

from mcpbench import cliutil
from mcpbench.load.runner import LocustFailed, run_scenario
from mcpbench.system.processes import ended
from mcpbench.protocol.errors import EXIT_ENVIRONMENT, EnvironmentProblem
from tests.load.helpers import scenario_from_text

SCENARIO = """
name: child-exit
target: http://127.0.0.1:9/mcp
mix:
  - call: tools/list
users: 1
duration: 1s
"""


def test_a_child_that_cannot_import_is_an_environment_failure(tmp_path, monkeypatch):
    # A `locust` package that fails as a truncated .pyc does, first on the child's path (the
    # runner puts mcpbench's own folder before it, not before Locust).
    doctored = tmp_path / "path" / "locust"
    doctored.mkdir(parents=True)
    (doctored / "__init__.py").write_text('raise ValueError("marshal data too short")\n')
    monkeypatch.setenv("PYTHONPATH", str(doctored.parent))
    with pytest.raises(LocustFailed) as caught:  # the child exits at once: nothing to stop
        run_scenario(scenario_from_text(SCENARIO), tmp_path / "out", check_target=False)
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    message = str(caught.value)
    assert "locust exited with status 1: ValueError: marshal data too short" in message and "SIG" not in message


def test_how_a_child_ended_names_a_signal_only_when_one_killed_it():
    assert ended(1) == "exited with status 1"
    assert ended(130) == "exited with status 130"
    assert ended(-signal.SIGKILL) == "was killed by SIGKILL"


def test_a_signal_an_earlier_command_got_does_not_stop_the_next(monkeypatch):
    """In one process (a test session, an embedder), `received` from one command must not turn the
    next command's failure into `stopped by SIGINT`, exit 130."""
    saved = {sig: signal.getsignal(sig) for sig in cliutil.STOP_SIGNALS}
    monkeypatch.setattr(cliutil, "received", signal.SIGINT)

    @cliutil.map_errors
    def command():
        raise EnvironmentProblem("the child crashed")

    try:
        with pytest.raises(SystemExit) as caught:
            command()
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        import atexit

        atexit.unregister(cliutil._exiting)
    assert caught.value.code == EXIT_ENVIRONMENT
