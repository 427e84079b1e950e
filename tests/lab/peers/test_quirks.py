"""The reference server's quirks: the command line's options and `Quirks.argv` say the same."""

import click
import pytest
from click.testing import CliRunner

from mcpbench.lab.cli import quirk_options
from mcpbench.lab.peers.quirks import Quirks

SEEN: list[Quirks] = []


@click.command()
@quirk_options
def command(quirks: Quirks) -> None:
    SEEN.append(quirks)


@pytest.mark.parametrize("quirks", [
    Quirks(),
    Quirks(unknown_session_status=400, host_check=False, version_header=False, delete=False, max_sessions=40, leaky_events=True,
           method_header=False),
    Quirks(delete=False),
])
def test_argv_parses_back_to_the_same_quirks(quirks):
    SEEN.clear()
    result = CliRunner().invoke(command, quirks.argv())
    assert result.exit_code == 0, result.output
    assert SEEN == [quirks]


def test_the_lab_refuses_quirks_that_mean_nothing_for_its_transport():
    runner = CliRunner()
    from mcpbench.lab.cli import lab

    assert "needs --resumable" in runner.invoke(lab, ["serve", "--transport", "streamable-http", "--leaky-events"]).output
    assert "HTTP transports only" in runner.invoke(lab, ["serve", "--no-delete"]).output
