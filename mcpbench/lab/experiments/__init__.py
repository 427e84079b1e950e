"""The lab's experiments, each a matrix of cells run as bounded load runs behind a lab topology:
sticky sessions (`sticky.py`) and reconnects under faults (`reconnect.py`), both read by one
matrix loader (`matrix.py`)."""
