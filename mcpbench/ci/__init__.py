"""Outputs for CI systems: what a command found, as test suites (no I/O in `cases.py`).

- `cases.py`: `Case` and `Suite`, what `replay`, `diff`, `inspect --strict`, `load` and the contract
  gate each turn their results into (their own modules do the turning).
- `junit.py`: JUnit XML (`--junit-xml FILE`), read by CI test reporters.
- `markdown.py`: a Markdown summary (`--summary-md FILE`) for `$GITHUB_STEP_SUMMARY` or a pull-request comment.
- `outputs.py`: the two click options and the writing of both files.
"""
