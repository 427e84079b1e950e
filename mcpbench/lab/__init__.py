"""The lab: the reference peers (`peers/`), instances behind a balancer (`topology/`) and the
experiments run on them (`experiments/`); `cli.py` is `mcpbench lab`."""
