"""`python -m mcpbench.replay`: the replay commands on their own (the same as `mcpbench replay|diff|serve-trace`)."""

import click

from mcpbench.replay.cli import COMMANDS


@click.group()
def main() -> None:
    """Replay traces, diff them, serve them."""


for command in COMMANDS:
    main.add_command(command)

if __name__ == "__main__":
    main()
