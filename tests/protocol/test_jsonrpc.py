import pytest

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.jsonrpc import (
    Batch,
    ErrorResponse,
    InvalidMessage,
    NotJson,
    Notification,
    Request,
    Response,
    decode,
    encode,
)

VALID = [
    (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}',
     Request(id=1, method="initialize", params={"protocolVersion": "2025-11-25"})),
    (b'{"jsonrpc":"2.0","id":"a","method":"ping"}', Request(id="a", method="ping")),
    (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', Notification(method="notifications/initialized")),
    (b'{"jsonrpc":"2.0","id":3,"result":{"content":[]}}', Response(id=3, result={"content": []})),
    (b'{"jsonrpc":"2.0","id":3,"result":null}', Response(id=3, result=None)),
    (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}',
     ErrorResponse(id=None, code=-32600, message="Session not found")),
    (b'{"jsonrpc":"2.0","id":5,"error":{"code":-32022,"message":"Unsupported","data":{"supported":["2026-07-28"]}}}',
     ErrorResponse(id=5, code=-32022, message="Unsupported", data={"supported": ["2026-07-28"]})),
]


@pytest.mark.parametrize("raw,expected", VALID)
def test_decode_classifies_and_encode_round_trips(raw, expected):
    message = decode(raw)
    assert message == expected
    assert decode(encode(message)) == expected


INVALID = [
    (b"hello", NotJson, "not JSON"),
    (b'"text"', InvalidMessage, "a JSON str"),
    (b'{"id":1,"method":"x"}', InvalidMessage, '"jsonrpc" must be "2.0"'),
    (b'{"jsonrpc":"1.0","id":1,"method":"x"}', InvalidMessage, '"jsonrpc" must be "2.0"'),
    (b'{"jsonrpc":"2.0","id":null,"method":"x"}', InvalidMessage, "id must not be null"),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', InvalidMessage, "string or an integer"),
    (b'{"jsonrpc":"2.0","id":true,"method":"x"}', InvalidMessage, "string or an integer"),
    (b'{"jsonrpc":"2.0","id":false,"result":1}', InvalidMessage, "response id must be a string or an integer"),
    (b'{"jsonrpc":"2.0","id":1.0,"result":1}', InvalidMessage, "response id must be a string or an integer"),
    (b'{"jsonrpc":"2.0","id":[1],"method":"x"}', InvalidMessage, "string or an integer"),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', InvalidMessage, "method must be a string"),
    (b'{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}', InvalidMessage, "params must be an object"),
    (b'{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}', InvalidMessage, "both result and error"),
    (b'{"jsonrpc":"2.0","result":1}', InvalidMessage, "response id must not be null"),
    (b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}', InvalidMessage, "error.code must be an integer"),
    (b'{"jsonrpc":"2.0","id":1,"error":"boom"}', InvalidMessage, "error must be an object"),
    (b'{"jsonrpc":"2.0","id":1}', InvalidMessage, "neither a request"),
    (b"[]", InvalidMessage, "empty batch"),
    (b'[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0"}]', InvalidMessage, "batch item 1"),
    (b"[[]]", InvalidMessage, "nested batch"),
]


@pytest.mark.parametrize("raw,error,reason", INVALID)
def test_invalid_messages_say_why(raw, error, reason):
    with pytest.raises(error) as info:
        decode(raw)
    assert reason in info.value.reason


def test_batch_keeps_order_and_kinds():
    message = decode(b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]')
    assert isinstance(message, Batch)
    assert [type(item) for item in message.items] == [Request, Notification]
    assert jsonrpc.to_obj(message)[1] == {"jsonrpc": "2.0", "method": "b"}


def test_constructors_validate():
    with pytest.raises(InvalidMessage):
        Request(id=None, method="x")
    with pytest.raises(InvalidMessage):
        ErrorResponse(id=1, code="bad", message="m")
    with pytest.raises(InvalidMessage):
        Notification(method="x", params=[1])


def test_invalid_utf8_is_not_json():
    with pytest.raises(NotJson):
        decode(b'{"jsonrpc":"2.0","method":"\xff"}')
