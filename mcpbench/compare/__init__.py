"""`mcpbench compare BASE NEW`: two load runs (or two sets of repeated runs) judged per step.

- `runs.py`: run folders into per-step HDR histograms, one per chunk of each run (no statistics).
- `units.py`: a run's chunks grouped into stretches of time; two runs side by side laid on one timeline.
- `stats.py`: quantiles of histograms, Student's t over units (runs or stretches), the two-proportion test (numpy).
- `thresholds.py`: `--fail-on` rules (`p95>+10%`, `errors>+1pp`), parsed and judged.
- `judge.py`: the comparison: per step, quantiles with intervals, differences, verdicts; as JSON and CI suites.
- `chart.py`: the two sides' distributions overlaid per step, with the differences and their intervals.
- `cli.py`: the command.
"""
