"""Deterministic replay of recorded MCP sessions, trace diffs and a mock server from a trace.

Modules: `plan` (trace -> per-session client steps), `transports` (stdio, Streamable HTTP, legacy
SSE), `engine` (the replayer), `compare` (normalise + diff), `report` (data, text, JSON),
`mock` (serve-trace: `mock_answers`, `mock_play`, `mock_stdio`, `mock_http`), `forward` (its live
answers), `cli` (click commands).
"""
