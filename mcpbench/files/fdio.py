"""Writing to a file descriptor: all of the bytes, whatever the descriptor takes at once."""

import os


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd`: one `write` in the usual case, more when a full pipe or a
    nearly full disk takes only part of it. Raises `OSError` as `os.write` does."""
    written = os.write(fd, data)
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]
