"""The contract-drift gate (replay/contract.py): every class of change, and the commands around it.

Each row of CASES changes one thing of a declared surface and names the class it must get; the
command-line cases compare made-up traces (`diff --contract`) and replay a recording against the
variant server without the tool `fail` (`replay --contract`).
"""

import copy
import json
from xml.etree import ElementTree

import pytest

from mcpbench.lab.peers import variant_server
from mcpbench.protocol.jsonrpc import ErrorResponse, Response
from mcpbench.replay.contract import BREAKING, COMPATIBLE, compare_surfaces, surface
from tests.replay.helpers import cli
from tests.support.recordings import stdio_target
from tests.support.traces import header, result, sent, write_trace
from tests.testing.helpers import stdio_command

CAPABILITIES = {"tools": {"listChanged": True}, "resources": {"subscribe": True}, "prompts": {}}
ECHO = {"name": "echo", "description": "Echo text", "inputSchema": {
    "type": "object", "required": ["text"],
    "properties": {"text": {"type": "string", "maxLength": 100}, "times": {"type": ["integer", "null"]},
                   "mode": {"enum": ["plain", "loud"]}, "tags": {"type": "array", "items": {"type": "string"}}}},
    "outputSchema": {"type": "object", "required": ["result"],
                     "properties": {"result": {"type": "string"}, "count": {"type": "integer"}}}}
ADD = {"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}}}}
RESOURCE = {"uri": "mcpbench://greeting", "name": "greeting", "mimeType": "text/plain"}
TEMPLATE = {"uriTemplate": "file:///{path}", "name": "file"}
PROMPT = {"name": "summarize", "arguments": [{"name": "topic", "required": True}, {"name": "style"}]}


def base() -> dict:
    return {"capabilities": copy.deepcopy(CAPABILITIES), "tools": [copy.deepcopy(ECHO), copy.deepcopy(ADD)],
            "resources": [dict(RESOURCE)], "resourceTemplates": [dict(TEMPLATE)], "prompts": [copy.deepcopy(PROMPT)]}


def calls(decl: dict) -> list[tuple]:
    out = [("initialize", {}, Response(id=1, result={"capabilities": decl["capabilities"]}))]
    for method, key in (("tools/list", "tools"), ("resources/list", "resources"),
                        ("resources/templates/list", "resourceTemplates"), ("prompts/list", "prompts")):
        if key in decl:
            out.append((method, None, Response(id=2, result={key: decl[key]})))
    return out


def changes(edit) -> list[tuple[str, str, str]]:
    new = base()
    edit(new)
    found, _ = compare_surfaces(surface(calls(base()), "old"), surface(calls(new), "new"))
    return [(change.severity, change.where, change.what) for change in found]


def schema(decl: dict, tool: int = 0, output: bool = False) -> dict:
    return decl["tools"][tool]["outputSchema" if output else "inputSchema"]


CASES = [
    # breaking
    ("tool removed", lambda d: d["tools"].pop(1), (BREAKING, "tool add", "removed")),
    ("resource removed", lambda d: d["resources"].clear(), (BREAKING, "resource mcpbench://greeting", "removed")),
    ("template removed", lambda d: d["resourceTemplates"].clear(), (BREAKING, "resource template file:///{path}", "removed")),
    ("prompt removed", lambda d: d["prompts"].clear(), (BREAKING, "prompt summarize", "removed")),
    ("capability withdrawn", lambda d: d["capabilities"].pop("prompts"), (BREAKING, "capabilities", "prompts withdrawn")),
    ("capability flag withdrawn", lambda d: d["capabilities"]["resources"].update(subscribe=False),
     (BREAKING, "capabilities", "resources.subscribe withdrawn")),
    ("required argument added", lambda d: (schema(d)["properties"].update(lang={"type": "string"}), schema(d)["required"].append("lang")),
     (BREAKING, "tool echo", "argument 'lang' added (required)")),
    ("optional argument made required", lambda d: schema(d)["required"].append("times"),
     (BREAKING, "tool echo", "argument 'times' now required")),
    ("argument removed", lambda d: schema(d)["properties"].pop("times"), (BREAKING, "tool echo", "argument 'times' removed")),
    ("argument type narrowed", lambda d: schema(d, 1)["properties"]["a"].update(type="integer"),
     (BREAKING, "tool add", "argument 'a': type number → integer")),
    ("nullable dropped", lambda d: schema(d)["properties"]["times"].update(type="integer"),
     (BREAKING, "tool echo", "argument 'times': type integer|null → integer")),
    ("enum narrowed", lambda d: schema(d)["properties"]["mode"].update(enum=["plain"]),
     (BREAKING, "tool echo", "argument 'mode': allowed values ['plain', 'loud'] → ['plain']")),
    ("bound tightened", lambda d: schema(d)["properties"]["text"].update(maxLength=10),
     (BREAKING, "tool echo", "argument 'text': maxLength 100 → 10")),
    ("item type changed", lambda d: schema(d)["properties"]["tags"]["items"].update(type="integer"),
     (BREAKING, "tool echo", "argument 'tags[]': type string → integer")),
    ("output property removed", lambda d: schema(d, output=True)["properties"].pop("count"),
     (BREAKING, "tool echo", "output 'count' removed")),
    ("output no longer required", lambda d: schema(d, output=True)["required"].clear(),
     (BREAKING, "tool echo", "output 'result' no longer required")),
    ("output type widened", lambda d: schema(d, output=True)["properties"]["count"].update(type="number"),
     (BREAKING, "tool echo", "output 'count': type integer → number")),
    ("output schema removed", lambda d: d["tools"][0].pop("outputSchema"), (BREAKING, "tool echo", "output schema removed")),
    ("prompt argument added required", lambda d: d["prompts"][0]["arguments"].append({"name": "length", "required": True}),
     (BREAKING, "prompt summarize", "argument 'length' added (required)")),
    ("MIME type changed", lambda d: d["resources"][0].update(mimeType="application/json"),
     (BREAKING, "resource mcpbench://greeting", "MIME type changed")),
    # compatible
    ("tool added", lambda d: d["tools"].append({"name": "new", "inputSchema": {"type": "object"}}), (COMPATIBLE, "tool new", "added")),
    ("optional argument added", lambda d: schema(d)["properties"].update(lang={"type": "string"}),
     (COMPATIBLE, "tool echo", "argument 'lang' added (optional)")),
    ("requirement dropped", lambda d: schema(d)["required"].clear(), (COMPATIBLE, "tool echo", "argument 'text' now optional")),
    ("argument type widened", lambda d: schema(d, 1)["properties"]["a"].update(type=["number", "string"]),
     (COMPATIBLE, "tool add", "argument 'a': type number → number|string")),
    ("enum widened", lambda d: schema(d)["properties"]["mode"].update(enum=["plain", "loud", "quiet"]),
     (COMPATIBLE, "tool echo", "argument 'mode': allowed values ['plain', 'loud'] → ['plain', 'loud', 'quiet']")),
    ("bound loosened", lambda d: schema(d)["properties"]["text"].pop("maxLength"),
     (COMPATIBLE, "tool echo", "argument 'text': maxLength 100 → None")),
    ("tool description", lambda d: d["tools"][0].update(description="Echo it"), (COMPATIBLE, "tool echo", "description changed")),
    ("argument description", lambda d: schema(d)["properties"]["text"].update(description="what to echo"),
     (COMPATIBLE, "tool echo", "argument 'text': description changed")),
    ("output property added", lambda d: schema(d, output=True)["properties"].update(extra={"type": "string"}),
     (COMPATIBLE, "tool echo", "output 'extra' added (optional)")),
    ("capability added", lambda d: d["capabilities"].update(logging={}), (COMPATIBLE, "capabilities", "logging added")),
    ("prompt argument optional added", lambda d: d["prompts"][0]["arguments"].append({"name": "length"}),
     (COMPATIBLE, "prompt summarize", "argument 'length' added (optional)")),
]


@pytest.mark.parametrize(("edit", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_each_change_gets_its_class(edit, expected):
    assert changes(edit) == [expected]


def test_the_same_surface_has_no_change_and_a_missing_listing_is_said_not_failed():
    assert changes(lambda d: None) == []
    old = base()
    del old["prompts"]
    found, notes = compare_surfaces(surface(calls(old), "old"), surface(calls(base()), "new"))
    assert found == [] and notes == ["the recording has no prompts/list: prompts not compared"]


def test_pages_are_joined_and_an_error_is_an_empty_listing():
    pages = [("tools/list", None, Response(id=1, result={"tools": [ECHO], "nextCursor": "2"})),
             ("tools/list", {"cursor": "2"}, Response(id=2, result={"tools": [ADD]}))]
    assert sorted(surface(pages, "x").listings["tools/list"]) == ["add", "echo"]
    gone = surface([("tools/list", None, ErrorResponse(id=1, code=-32601, message="Method not found"))], "the live server")
    assert gone.listings["tools/list"] == {} and gone.notes == ["the live server answered tools/list with an error: Method not found"]


def contract_trace(path, decl: dict):
    """A stdio trace of one session declaring `decl`."""
    events = []
    for number, (method, params, answer) in enumerate(calls(decl), 1):
        events += [sent(1.0 + number, number, method, params or {}, v=2), result(1.5 + number, number, answer.result, v=2)]
    return write_trace(path, events, header=header(v=2))


def test_diff_contract_exit_status_junit_and_json(tmp_path):
    a = contract_trace(tmp_path / "a.jsonl", base())
    new = base()
    new["tools"].pop(1)
    new["tools"].append({"name": "new", "inputSchema": {"type": "object"}})
    b = contract_trace(tmp_path / "b.jsonl", new)
    junit, report = tmp_path / "c.xml", tmp_path / "c.json"
    done = cli("diff", "--contract", str(a), str(b), "--junit-xml", str(junit), "--report", str(report))
    assert done.returncode == 1, done.stderr
    assert "breaking   tool add: removed" in done.stdout and "compatible tool new: added" in done.stdout
    root = ElementTree.fromstring(junit.read_bytes())
    assert (root.get("tests"), root.get("failures")) == ("2", "1")
    assert root.find("testsuite/testcase/failure").get("message") == "breaking: removed"
    assert json.loads(report.read_text())["counts"] == {"breaking": 1, "compatible": 1}

    only_added = base()
    only_added["tools"].append({"name": "new", "inputSchema": {"type": "object"}})
    c = contract_trace(tmp_path / "c.jsonl", only_added)
    assert cli("diff", "--contract", str(a), str(c)).returncode == 0
    assert cli("diff", "--contract", "--fail-on", "any", str(a), str(c)).returncode == 1
    assert cli("diff", "--contract", str(a), str(a)).returncode == 0


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_replay_contract_against_a_server_without_a_tool(recordings, tmp_path):
    trace = recordings["legacy"]
    same = cli("replay", "--contract", str(trace), "--target", stdio_target())
    assert same.returncode == 0, same.stdout + same.stderr
    assert "0 breaking, 0 compatible" in same.stdout
    assert "note: the recording has no resources/templates/list: resource templates not compared" in same.stdout
    gone = cli("replay", "--contract", str(trace), "--target", stdio_command(variant_server.__name__, "no-fail"),
               "--summary-md", str(tmp_path / "c.md"))
    assert gone.returncode == 1, gone.stdout + gone.stderr
    assert "breaking   tool fail: removed" in gone.stdout
    assert "| ❌ | `" in (tmp_path / "c.md").read_text()
