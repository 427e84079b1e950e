"""The reader's batch check (`_well_formed`) gives the verdict its first, plainer definition gave.

A batch it passes is handed on unchecked event by event, and one it fails goes line by line to name
the bad line: a cheaper check must pass and fail exactly the same batches. `reference` below is the
definition it replaced, kept as the yardstick; batches are JSON values, as `orjson.loads` gives them.
"""

import re
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpbench.protocol.errors import TraceError
from mcpbench.trace import reader as reader_module
from mcpbench.trace.reader import _KNOWN, _TYPED_KINDS, TraceReader, _well_formed
from tests.support.fuzz import json_values
from tests.support.traces import event, header, lines

pytestmark = pytest.mark.fuzz

EPOCH = 1796000000.25


def reference(events):
    """`_well_formed`'s verdict, event by event: every event an object whose `v` is a known version
    (an integer: the line-by-line check's rule), `ts` an int or a float, `kind` a string of no typed kind, `dir`
    one of the three, `session` a string or null, and `msg` an object, an array, null or absent."""

    def one(event):
        if type(event) is not dict or not {"v", "ts", "kind"} <= event.keys():
            return False
        try:
            known = type(event["v"]) is int and event["v"] in _KNOWN and event.get("dir") in ("c2s", "s2c", None)
        except TypeError:  # an unhashable value is no version and no direction
            return False
        return (known and type(event["ts"]) in (int, float) and type(event["kind"]) is str
                and event["kind"] not in _TYPED_KINDS and type(event.get("session")) in (str, type(None))
                and type(event.get("msg")) in (dict, list, type(None)))

    return all(map(one, events))


def good(ts=EPOCH, **fields):
    return {"v": 2, "ts": ts, "session": "s1", "dir": "c2s", "kind": "message", "msg": {"jsonrpc": "2.0"}, **fields}


def without(name):
    event = good()
    del event[name]
    return event


# Each row: a batch of good events with one odd one among them (first, middle or alone).
ODD = {
    "good": good(),
    "bool ts true": good(True),
    "bool ts false": good(False),
    "int ts": good(1796000000),
    "ts 0": good(0),
    "ts 1.0": good(1.0),
    "ts 0.5": good(0.5),
    "negative ts": good(-3.5),
    "string ts": good("1796000000"),
    "null ts": good(None),
    "list ts": good([1]),
    "object ts": good({}),
    "no ts": without("ts"),
    "no v": without("v"),
    "no kind": without("kind"),
    "no dir": without("dir"),
    "no session": without("session"),
    "no msg": without("msg"),
    "v true": {**good(), "v": True},
    "v 1.0": {**good(), "v": 1.0},
    "v 3": {**good(), "v": 3},
    "v string": {**good(), "v": "1"},
    "v list": {**good(), "v": [1]},
    "kind int": good(kind=1),
    "kind null": good(kind=None),
    "kind list": good(kind=["message"]),
    "typed kind http": good(kind="http"),
    "typed kind sse": good(kind="sse"),
    "other kind": good(kind="stderr"),
    "dir bad": good(dir="up"),
    "dir int": good(dir=1),
    "dir null": good(dir=None),
    "dir list": good(dir=["c2s"]),
    "session null": good(session=None),
    "session int": good(session=7),
    "session bool": good(session=True),
    "session list": good(session=["s1"]),
    "session object": good(session={"s": 1}),
    "msg list": good(msg=[]),
    "msg null": good(msg=None),
    "msg string": good(msg="{}"),
    "msg int": good(msg=1),
    "msg bool": good(msg=False),
    "not an object: array": [1, 2],
    "not an object: string": "v",
    "not an object: number": 3,
    "not an object: null": None,
}


@pytest.mark.parametrize("name", ODD)
def test_one_odd_event_gets_the_same_verdict(name):
    odd = ODD[name]
    for ts in [EPOCH, 0.0, 1, -5.0]:  # the good events' times: above 1, or not
        others = [good(ts + i) for i in range(4)]
        for batch in ([odd], [odd, *others], [*others[:2], odd, *others[2:]], [*others, odd], [odd, odd], [odd, good(ts), odd]):
            assert _well_formed(batch) is reference(batch), (ts, batch)


FIELD_VALUES = {
    "v": st.sampled_from([1, 2, 3, 0, True, False, 1.0, 2.0, "1", None]) | json_values,
    "ts": st.sampled_from([EPOCH, 1796000000, 0, 1, 0.0, 1.0, -1.0, 1.5, True, False, None, "1", [], {}])
    | st.floats(allow_nan=False, allow_infinity=False) | st.integers(min_value=-(2**63), max_value=2**64 - 1) | json_values,
    "kind": st.sampled_from(["message", "stderr", "trace", "violation", *_TYPED_KINDS, "", 1, None]) | json_values,
    "dir": st.sampled_from(["c2s", "s2c", None, "", "C2S", 0]) | json_values,
    "session": st.sampled_from(["s1", "s2", None, True, 0]) | json_values,
    "msg": st.sampled_from([{}, [], None, "x", 1, True]) | json_values,
    "flow": st.sampled_from([1, "f1", None]),
}


@st.composite
def events(draw):
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)  # no object, or an object of anything
    fields = {}
    for name, values in FIELD_VALUES.items():
        if draw(st.integers(0, 7)):  # present 7 times in 8
            # mostly a good value, so that one bad field decides a batch's verdict
            fields[name] = draw(values) if draw(st.integers(0, 5)) == 0 else good(flow=1)[name]
    return fields


@given(st.lists(events(), max_size=12), st.sampled_from([EPOCH, 0.5, 1.0, 2.0]))
def test_any_batch_gets_the_same_verdict(batch, start):
    batch = orjson.loads(orjson.dumps([good(start + i) for i in range(3)] + batch))  # as the parser gives them
    assert _well_formed(batch) is reference(batch)
    assert _well_formed(batch[3:]) is reference(batch[3:])


@pytest.mark.parametrize("odd,message", [
    (b'"ts":true', "field 'ts' must be a number (epoch seconds), not true"),
    (b'"ts":"1"', "field 'ts' must be a number (epoch seconds), not \"1\""),
    (b'"session":["s"]', "field 'session' must be a string or null"),
    # equal to 1 and 2, as the versions read before them in the batch are: still no versions
    (b'"v":true', "field 'v' must be an integer, not true"),
    (b'"v":2.0', "field 'v' must be an integer, not 2.0"),
])
def test_a_bad_field_deep_in_a_batch_is_named_at_its_line(tmp_path, monkeypatch, odd, message):
    monkeypatch.setattr(reader_module, "BATCH_BYTES", 4096)
    events = [header(v=2)] + [event(EPOCH + i, "s1", "c2s", {"jsonrpc": "2.0", "method": "ping"}, v=2) for i in range(40)]
    data = lines(*events).split(b"\n")
    field = odd.split(b":")[0] + b":"
    start = data[20].index(field)
    data[20] = data[20][:start] + odd + data[20][data[20].index(b",", start):]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(data))
    with pytest.raises(TraceError, match=re.escape(f"t.jsonl:21: {message}")):
        list(TraceReader(path))


def test_a_message_event_without_a_message_reads_the_same_beside_a_bad_line(tmp_path):
    """A message event whose `msg` is null or missing passes the batch check (the model makes it an
    invalid-message violation) and the line-by-line check alike: a bad line in its batch is the one named."""
    fine = lines(header(), event(2.0, "s1", "c2s"), {**event(3.0, "s1", "c2s"), "msg": None})
    path = tmp_path / "t.jsonl"
    path.write_bytes(fine)
    assert len(list(TraceReader(path))) == 3
    path.write_bytes(fine + b'{"v":1,"ts":"late","session":"s1","dir":"c2s","kind":"message","msg":{}}\n')
    with pytest.raises(TraceError, match=r"t\.jsonl:4: field 'ts'"):
        list(TraceReader(path))
