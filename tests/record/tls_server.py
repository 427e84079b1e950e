"""The reference server's Streamable HTTP app over TLS, for `record --upstream https://…` tests.

    python tests/record/tls_server.py PORT CERT KEY
"""

import sys

import uvicorn

from mcpbench.lab.peers.reference_server import build_server


def main() -> None:
    port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    app = build_server().streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, ssl_certfile=cert, ssl_keyfile=key, log_level="warning")


if __name__ == "__main__":
    main()
