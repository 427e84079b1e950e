"""`mcpbench probe URL`: is this deployment ready? Bounded checks of an HTTP MCP endpoint, one table.

    target.py     first contact: reachable, MCP, credentials; what the checks need to know
    wire.py       the probe's options (credentials, proxy, bounds); a session's transport, a raw request
    sessions.py   one MCP session per check: the client core driven one exchange at a time on a transport
    checks/       the nine checks, each a measurement and a `judge`
    verdicts.py   rows, the table, the exit status
    run.py        which checks run, within which bounds; `ProbeRun` and its JSON
    cli.py        the command
"""
