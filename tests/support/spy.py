"""A deliberately naive stdio spy, the test oracle for the tee.

    python spy.py LOG -- COMMAND ARGS...

Runs COMMAND, copies our stdin to its stdin and its stdout to our stdout line
by line, and appends every line, as is, to LOG.c2s and LOG.s2c. It shares no
code with mcpbench, so it can tell what each end of the tee really saw.
"""

import subprocess
import sys
import threading


def copy(src, dst, log_path, close_dst):
    with open(log_path, "wb") as log:
        for line in iter(src.readline, b""):
            log.write(line)
            log.flush()
            dst.write(line)
            dst.flush()
    if close_dst:
        dst.close()


def main():
    log, argv = sys.argv[1], sys.argv[sys.argv.index("--") + 1 :]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    up = threading.Thread(target=copy, args=(sys.stdin.buffer, proc.stdin, log + ".c2s", True), daemon=True)
    down = threading.Thread(target=copy, args=(proc.stdout, sys.stdout.buffer, log + ".s2c", False))
    up.start()
    down.start()
    down.join()
    sys.exit(proc.wait())


if __name__ == "__main__":
    main()
