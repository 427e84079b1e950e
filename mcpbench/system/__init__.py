"""This machine's processes and addresses: child processes (`processes.py`), listening addresses (`listen.py`), targets (`target.py`)."""
