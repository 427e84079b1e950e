"""Instances behind a balancer: N reference servers and the built-in balancer or HAProxy in front of
them (`cluster.py`, `haproxy.py`), and `lab up`/`lab down` (`up.py`)."""
