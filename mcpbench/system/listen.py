"""Whether a listening address can be used, checked before a server announces itself.

Servers that bind deep inside a library (mitmproxy, uvicorn) only log a busy
port; a check first turns it into one line and exit status 3 (`BindError`).
"""

import socket

from mcpbench.protocol.errors import BadTargetError, BindError


def parse_address(text: str, option: str, example: str) -> tuple[str, int]:
    """`127.0.0.1:8081` -> (`127.0.0.1`, 8081); `[::1]:8081` for IPv6; port 0 picks a free one.

    Raises:
        BadTargetError: not HOST:PORT (the message names `option` and shows `example`).
    """
    host, colon, port = text.strip().rpartition(":")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise BadTargetError(f"{option} {text!r}: expected HOST:PORT, such as {example}")
    return host.strip("[]"), int(port)


def bind_error(host: str, port: int, exc: OSError) -> BindError:
    """The one-line error for a failed bind on `host`:`port`."""
    shown = f"[{host}]" if ":" in host else host
    return BindError(f"cannot listen on {shown}:{port}: {exc.strerror or exc}")


def check_listen(host: str, port: int) -> None:
    """Bind `host`:`port` once and let go; raise `BindError` when the port is busy or the host unknown.

    Port 0 checks the host alone.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise bind_error(host, port, exc) from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            raise bind_error(host, port, exc) from None
