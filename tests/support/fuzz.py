"""What the fuzz tests share: the Hypothesis profiles, strategies for hostile input and chunkings, and
a memory probe.

Profiles (tests/conftest.py registers them; `suite` is the default):

- `suite`: Hypothesis's 100 examples per test, no deadline (a busy machine must not fail a test on
  time): the fuzz tests take a few seconds in all;
- `long`: 5,000 examples per test, and the memory tests' 100 MiB line and event:
  `./dev test -m fuzz --hypothesis-profile long --timeout 0 --hypothesis-show-statistics`.
"""

import tracemalloc
from collections.abc import Callable, Iterator

import orjson
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from mcpbench.protocol.jsonrpc import Batch, ErrorResponse, Notification, Request, Response

LONG_EXAMPLES = 5_000
MiB = 1024 * 1024
# The size of the memory tests' line or event: bounded in the suite, 100 MiB in the long run.
SUITE_BIG, LONG_BIG = 4 * MiB, 100 * MiB


def register_profiles() -> None:
    common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
    settings.register_profile("suite", max_examples=100, **common)
    settings.register_profile("long", max_examples=LONG_EXAMPLES, **common)
    settings.load_profile("suite")


def at_least(examples: int) -> int:
    """A test's own example budget, or the profile's when that is larger (the long run)."""
    return max(examples, settings.default.max_examples)


def big_size() -> int:
    """The memory tests' size under the profile in force."""
    return LONG_BIG if settings.default.max_examples >= LONG_EXAMPLES else SUITE_BIG


# --- chunkings ------------------------------------------------------------------------------------


def cuts(max_cuts: int = 30) -> st.SearchStrategy[list[int]]:
    """Cut points for `chunked` (taken modulo the data's length)."""
    return st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=max_cuts)


def chunked(data: bytes, points: list[int]) -> list[bytes]:
    """`data` cut at `points` (modulo its length) into non-empty chunks, in order."""
    if not data:
        return []
    bounds = sorted({0, len(data), *(p % len(data) for p in points)})
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


# --- hostile bytes --------------------------------------------------------------------------------

# Bytes that matter to the parsers, so that random input hits their branches often.
_TOKENS = [b"\n", b"\r", b"\r\n", b"\n\n", b"data:", b"data: ", b"event: message\n", b"event: endpoint\n", b"id: 7\n",
           b"retry: 5\n", b": ping\n", b"\xef\xbb\xbf", b"{", b"}", b"[", b"]", b'"', b",", b":", b"\0", b"\xff",
           b'{"jsonrpc":"2.0","id":1,"result":{}}', b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}',
           b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":[]}}',
           b'{"jsonrpc":"2.0","id":"x","error":{"code":-32600,"message":"m"}}', b"[]", b"null", b"1e999", b"-0",
           b'{"jsonrpc":"2.0","id":true,"result":1}', b"data: /messages/?session_id=ab\n"]

hostile_bytes = st.lists(st.one_of(st.binary(max_size=40), st.sampled_from(_TOKENS)), max_size=40).map(b"".join)


# --- JSON values and messages ---------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | \
    st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=5)
ids = st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=12)
methods = st.sampled_from(["initialize", "notifications/initialized", "tools/call", "tools/list", "ping", "server/discover",
                           "sampling/createMessage", "notifications/progress", "notifications/cancelled"]) | st.text(max_size=16)
params = st.none() | json_objects

single_messages = st.one_of(
    st.builds(Request, id=ids, method=methods, params=params),
    st.builds(Notification, method=methods, params=params),
    st.builds(Response, id=ids, result=json_values),
    st.builds(ErrorResponse, id=st.none() | ids, code=st.integers(min_value=-(2**63), max_value=2**63 - 1),
              message=st.text(max_size=20), data=json_values),
)
messages = single_messages | st.lists(single_messages, min_size=1, max_size=4).map(lambda items: Batch(items=tuple(items)))


# --- memory ---------------------------------------------------------------------------------------


def peak_memory(run: Callable[[], object]) -> int:
    """The most memory Python held at once while `run` ran, above what it held before (tracemalloc)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = run()
        peak = tracemalloc.get_traced_memory()[1] - before
        del result
        return peak
    finally:
        tracemalloc.stop()


def pieces(total: int, piece: bytes) -> Iterator[bytes]:
    """`total` bytes as repeats of the one object `piece` (the input costs no memory of its own)."""
    for _ in range(total // len(piece)):
        yield piece
    if rest := total % len(piece):
        yield piece[:rest]


CHUNK = b"a" * 65536
# What a parser may hold at its peak, as a multiple of the line: the line being gathered, the copy
# it hands out, and what it builds of it (a str as long as the text).
MAX_RATIO = 4.5
SLACK = 1 * MiB
MESSAGE_HEAD, MESSAGE_TAIL = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"', b'"}]}}'  # a tools/call answer


def fed_huge(parser, head: bytes, size: int, tail: bytes) -> list:
    """Feed `head`, `size` bytes of filler in 64 KiB chunks and `tail`, then the end; the events handed
    out (kept to the end, as a caller keeps them)."""
    events = parser.feed(head)
    for piece in pieces(size, CHUNK):
        events += parser.feed(piece)
    events += parser.feed(tail)
    events += parser.feed(b"")
    return events


def check_peak(run: Callable[[], object], size: int, *, decoded: bool = False) -> None:
    """`run`'s peak is at most `MAX_RATIO` times `size`, plus, when it decodes the message `MESSAGE_HEAD` +
    filler + `MESSAGE_TAIL`, what `orjson.loads` of that text takes: orjson reserves about 13 times the text
    for its document at once (tracemalloc counts the reservation; the pages it never touches are not
    resident, the process grows by the decoded value alone)."""
    allowed = MAX_RATIO * size + SLACK + (json_parse_peak(size) if decoded else 0)
    peak = peak_memory(run)
    assert peak <= allowed, f"peak {peak / MiB:.1f} MiB for a {size / MiB:.0f} MiB line ({peak / size:.2f}x; allowed {allowed / MiB:.0f} MiB)"


def json_parse_peak(size: int) -> int:
    text = MESSAGE_HEAD + b"a" * size + MESSAGE_TAIL
    return peak_memory(lambda: orjson.loads(text))
