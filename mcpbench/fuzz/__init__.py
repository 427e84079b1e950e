"""`mcpbench fuzz TARGET`: generated and mutated tool calls against a live server, each answer judged.

`session.py` (one session of the client core, one call at a time), `cases.py` (what to send),
`judge.py` (what an answer is), `findings.py` (traces, table), `run.py` (the loop), `cli.py`.
"""
