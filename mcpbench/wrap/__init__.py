"""`mcpbench wrap` / `unwrap`: put `mcpbench tee` in front of the stdio servers of MCP hosts' configs.

`hosts.py` knows where each host keeps its config, `jsonc.py` reads a config with the place of
every value, `edit.py` wraps and unwraps one entry by editing those places only, and `run.py`
plans a whole command over every config before writing any.
"""
