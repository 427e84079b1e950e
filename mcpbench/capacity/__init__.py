"""`mcpbench capacity`: the highest rate a server holds its SLO at, found with an open-model ramp.

`analysis.py` judges the run's steps from its samples and the ramp's timeline (the knee, the break,
the recovery), `chart.py` draws rate against latency and errors, `cli.py` is the command. The ramp
itself runs inside Locust: `mcpbench.load.ramp` (the plan and its judge) and `load/rampshape.py`.
"""
