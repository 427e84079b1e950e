"""A plain pipe-through tee in Python, the baseline of `bench tee`: three threads copy, nothing is recorded.

    python -m mcpbench.bench.plain_tee COMMAND [ARGS…]

What anyone would write first: the server as a child, one thread per pipe (stdin → its stdin, its
stdout → stdout, its stderr → stderr), blocking `os.read`/`os.write`, its exit status returned.
"""

import os
import subprocess
import sys
import threading


def copy(src: int, dst: int, close) -> None:
    while chunk := os.read(src, 65536):
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view) :]
    close()


def main() -> int:
    proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    threading.Thread(target=copy, args=(0, proc.stdin.fileno(), proc.stdin.close), daemon=True).start()
    out = threading.Thread(target=copy, args=(proc.stdout.fileno(), 1, lambda: os.close(1)), daemon=True)
    err = threading.Thread(target=copy, args=(proc.stderr.fileno(), 2, lambda: None), daemon=True)
    out.start()
    err.start()
    code = proc.wait()
    out.join()
    err.join()
    return code


if __name__ == "__main__":
    sys.exit(main())
