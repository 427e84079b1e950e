"""Compressed traces: `.jsonl.gz` (gzip) and `.jsonl.zst` (zstd), written so a crash loses at most the tail.

The writer's compressor is flushed at every write (gzip: a sync flush; zstd: the end of a block),
so the file always holds everything needed to decode every event written: after a kill -9, every
complete event reads back, and at most the last line is torn, as with a plain trace. Closing ends
the stream (gzip's trailer, zstd's frame end). The reader knows a compressed file by its first
bytes, whatever its name, and reads a stream that stops short up to its last complete line.

zstd comes from the standard library (`compression.zstd`, Python 3.14) or its backport
(`backports.zstd`, which mitmproxy requires before 3.14); where neither exists, `.zst` is refused.
"""

import zlib
from collections.abc import Iterator
from typing import BinaryIO

from mcpbench.protocol.errors import TraceError

GZIP_SUFFIX = ".gz"
ZSTD_SUFFIX = ".zst"
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

# Level 6 (zlib's default) and zstd's 3 (its default): most of the gain for little CPU; a trace is
# written on the recorded session's hot path.
GZIP_LEVEL = 6
GZIP_WBITS = 31  # zlib's value for a gzip header and trailer
ZSTD_LEVEL = 3


def _zstd():
    try:
        from compression import zstd  # Python >= 3.14
    except ImportError:
        try:
            from backports import zstd  # mitmproxy's dependency before 3.14
        except ImportError:
            return None
    return zstd


class Compressor:
    """Turns each write into bytes that decode on their own after what came before.

    `data(chunk)` gives the compressed, flushed bytes of `chunk`; `end()` the stream's last bytes.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        if kind == "gzip":
            self._gzip = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, GZIP_WBITS)
        else:
            zstd = _zstd()
            self._zstd = zstd.ZstdCompressor(level=ZSTD_LEVEL)
            self._flush_block = zstd.ZstdCompressor.FLUSH_BLOCK

    def data(self, chunk: bytes) -> bytes:
        if self.kind == "gzip":
            return self._gzip.compress(chunk) + self._gzip.flush(zlib.Z_SYNC_FLUSH)
        return self._zstd.compress(chunk, self._flush_block)

    def end(self) -> bytes:
        if self.kind == "gzip":
            return self._gzip.flush(zlib.Z_FINISH)
        return self._zstd.flush()


def compressor_for(path) -> Compressor | None:
    """The compressor a trace file's name asks for (`.gz`, `.zst`), or None.

    Raises:
        TraceError: `.zst` where no zstd module exists.
    """
    name = str(path)
    if name.endswith(GZIP_SUFFIX):
        return Compressor("gzip")
    if name.endswith(ZSTD_SUFFIX):
        if _zstd() is None:
            raise TraceError(f"{path}: zstd is not available in this Python (use .gz)")
        return Compressor("zstd")
    return None


def read_blocks(handle: BinaryIO, size: int, path) -> tuple[Iterator[bytes], list[str]]:
    """The file's bytes in blocks of about `size`, decompressed when it is a compressed trace.

    Returns the blocks and a list that, once they are consumed, holds a note when a compressed
    stream stopped short (a writer killed, or still writing) or broke: what came before it is read.
    """
    notes: list[str] = []
    first = handle.read(size)
    if first.startswith(GZIP_MAGIC):
        return _decompressed(first, handle, size, zlib.decompressobj(GZIP_WBITS), zlib.error, "gzip", notes, path), notes
    if first.startswith(ZSTD_MAGIC) and (zstd := _zstd()) is not None:
        return _decompressed(first, handle, size, zstd.ZstdDecompressor(), zstd.ZstdError, "zstd", notes, path), notes
    return _plain(first, handle, size), notes


def _plain(first: bytes, handle: BinaryIO, size: int) -> Iterator[bytes]:
    block = first
    while block:
        yield block
        block = handle.read(size)


def _decompressed(first: bytes, handle: BinaryIO, size: int, decoder, error, name: str, notes: list[str], path) -> Iterator[bytes]:
    block = first
    read = 0
    while block and not decoder.eof:
        try:
            data = decoder.decompress(block)
        except error as exc:
            notes.append(f"{path}: {name} stream broken after {read} compressed bytes ({exc}): read up to there")
            return
        read += len(block)
        if data:
            yield data
        block = handle.read(size)
    if not decoder.eof:
        notes.append(f"{path}: {name} stream stops short (the writer was killed, or is still writing): read up to its last complete line")
