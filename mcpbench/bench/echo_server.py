"""A minimal, fast stdio MCP-shaped echo server for benchmarks: answers each request with an empty result.

    python -m mcpbench.bench.echo_server
"""

import sys

import orjson


def main() -> None:
    read, write, flush = sys.stdin.buffer.readline, sys.stdout.buffer.write, sys.stdout.buffer.flush
    while line := read():
        message = orjson.loads(line)
        if "id" in message and "method" in message:
            write(b'{"jsonrpc":"2.0","id":%s,"result":{}}\n' % orjson.dumps(message["id"]))
            flush()


if __name__ == "__main__":
    main()
