"""What an HTTP body is: its media type, and its content coding undone as it streams; free of I/O.

The observer (`observer.py`) and the HTTP rules (`http.py`, which re-exports these names) both read
bodies through these, so "is this body JSON" has one answer.
"""

import zlib
from collections.abc import Callable

JSON = "application/json"
EVENT_STREAM = "text/event-stream"


def media_type(content_type: str | None) -> str:
    """`text/event-stream; charset=utf-8` -> `text/event-stream`."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_event_stream(content_type: str | None) -> bool:
    return media_type(content_type) == EVENT_STREAM


def is_json(content_type: str | None) -> bool:
    kind = media_type(content_type)
    return kind == JSON or kind.endswith("+json")


def stream_decoder(encoding: str | None) -> Callable[[bytes], bytes] | None:
    """An incremental decoder for a body sent with `Content-Encoding: encoding`.

    Feed it the body's chunks as they come and `b""` at the end; it returns the
    decoded bytes each time. A compressing proxy in front of a server can send
    an event stream gzip'd: the stream still passes through untouched, and the
    recorder decodes its copy. Identity gives a pass-through; an encoding this
    Python cannot decode (zstd before 3.14, say) gives None.
    """
    codings = [c.strip().lower() for c in (encoding or "").split(",") if c.strip() and c.strip().lower() != "identity"]
    steps = []
    for coding in reversed(codings):  # the last applied is listed last: undo it first
        if coding in ("gzip", "x-gzip", "deflate"):
            steps.append(_ZlibStream().feed)
        elif coding == "br":
            try:
                import brotli  # a dependency of mitmproxy
            except ImportError:
                return None
            decompressor = brotli.Decompressor()
            steps.append(lambda chunk, d=decompressor: d.process(chunk) if chunk else b"")
        else:
            return None
    if not steps:
        return lambda chunk: chunk

    def decode(chunk: bytes) -> bytes:
        end = not chunk
        for step in steps:  # at the end, each step takes what the one before let out, then flushes
            chunk = (step(chunk) if chunk else b"") + (step(b"") if end else b"")
        return chunk

    return decode


class _ZlibStream:
    """gzip or zlib-wrapped deflate, incrementally; raw deflate when the first chunk says so."""

    def __init__(self) -> None:
        # wbits 47: a gzip or a zlib header, whichever comes. Some servers send raw deflate
        # for "deflate": the first chunk then fails to decode and is tried again as that.
        self._decompressor = zlib.decompressobj(47)
        self._started = False

    def feed(self, chunk: bytes) -> bytes:
        if not chunk:
            return self._decompressor.flush()
        if not self._started:
            self._started = True
            try:
                return self._decompressor.decompress(chunk)
            except zlib.error:
                self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._decompressor.decompress(chunk)


def looks_json(body: bytes) -> bool:
    """Whether `body` starts as a JSON object or array would (whitespace aside): worth decoding
    when its content type does not say."""
    return body.lstrip()[:1] in (b"{", b"[")
