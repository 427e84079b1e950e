"""A null OTLP/HTTP receiver for benchmarks: takes every export request, answers 200, keeps nothing.

`python -m mcpbench.bench.otlp_sink` prints its URL on stdout, then serves until stdin ends; on
exit it prints the requests and bytes it took. A process of its own, so that receiving costs the
measured processes nothing but the sending.
"""

import http.server
import sys
import threading


class Sink(http.server.BaseHTTPRequestHandler):
    requests = 0
    bytes = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        size = int(self.headers.get("content-length") or 0)
        self.rfile.read(size)
        Sink.requests += 1
        Sink.bytes += size
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    server.shutdown()
    print(f"{Sink.requests} {Sink.bytes}", flush=True)


if __name__ == "__main__":
    main()
