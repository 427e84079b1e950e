"""The probe's checks, one module each: `NAME`, `TITLE`, `BOUND` (seconds) and `run(target, deadline) -> Row`.

Each measures through `probe/sessions.py` and decides in a `judge(figures)` of its own, free of I/O.
"""
