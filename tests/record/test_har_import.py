"""`mcpbench trace import --har`: a recording exported as HAR imports back to the same sessions and calls.

Recordings of the official SDK client against the reference servers (Streamable HTTP in both eras,
legacy HTTP+SSE) through mitmdump with the addon; exported with `mcpbench export --har`; imported;
then read by inspect and replayed against the same server.
"""

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from mcpbench.analysis.inspect import summarize
from mcpbench.lab.peers.drive import drive, sdk_target
from mcpbench.trace import read_trace
from tests.record.helpers import mitmdump
from tests.support.browser import find_chromium
from tests.support.devtools_har import page_session_har

WAIT = 120.0


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcpbench", *args], capture_output=True, timeout=WAIT)


def calls(path: Path) -> dict[tuple[str, str], list]:
    """Per session and direction: each message's method, id and whether it is an error, in order (what
    replay and the mock key on; a HAR keeps no time per SSE event, so the two directions' interleaving
    may differ where the exchanges allow either)."""
    out: dict[tuple[str, str], list] = {}
    for event in read_trace(path):
        if event["kind"] == "message":
            msg = event["msg"]
            out.setdefault((event["session"], event["dir"]), []).append((msg.get("method"), msg.get("id"), "error" in msg))
    return out


def round_trip(tmp_path: Path, trace: Path) -> tuple[Path, str]:
    har = tmp_path / "session.har"
    exported = cli("export", "--har", str(trace))
    assert exported.returncode == 0, exported.stderr
    har.write_bytes(exported.stdout)
    imported = tmp_path / "imported.jsonl"
    done = cli("trace", "import", "--har", str(har), "--out", str(imported))
    assert done.returncode == 0, done.stderr
    return imported, done.stdout.decode() + done.stderr.decode()


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_an_exported_recording_imports_back_to_the_same_sessions_and_calls(request, tmp_path, transport):
    server = request.getfixturevalue("http_server" if transport == "streamable-http" else "sse_server")
    trace = tmp_path / "recorded.jsonl"
    with mitmdump(server.port, trace) as proxy:
        if transport == "sse":
            drive(sdk_target(proxy.url("/sse"), "sse"), "legacy")
        else:
            drive(proxy.url("/mcp"), "legacy")
            drive(proxy.url("/mcp"), "auto")  # 2026-07-28: sessionless, keyed by connection
    imported, said = round_trip(tmp_path, trace)
    before, after = calls(trace), calls(imported)
    assert after == before
    assert sum(1 for (_, d), items in after.items() for method, id_, _ in items if d == "c2s" and method and id_ is not None) >= 10
    assert "a HAR keeps no time per event" in said  # what the HAR lacks is said…
    assert "left out" not in said and "without a body" not in said  # …and only that (a stream that carried nothing is no gap)
    # inspect reads it as it reads the recording: the same sessions, requests and outcomes, no violation.
    old, new = summarize(str(trace)), summarize(str(imported))
    assert [(s.transport, len(s.calls)) for s in new.sessions] == [(s.transport, len(s.calls)) for s in old.sessions]
    assert [[r.outcome for r in s.calls] for s in new.sessions] == [[r.outcome for r in s.calls] for s in old.sessions]
    assert not any(s.of_kind("violation") for s in new.sessions)
    # Every event of the trace is in time order: SSE events got times the exchanges allow.
    stamps = [event["ts"] for event in read_trace(imported)]
    assert stamps == sorted(stamps)


@pytest.mark.slow
def test_an_imported_trace_replays_and_is_served_by_the_mock(http_server, tmp_path):
    trace = tmp_path / "recorded.jsonl"
    with mitmdump(http_server.port, trace) as proxy:
        drive(proxy.url("/mcp"), "legacy")
    imported, _ = round_trip(tmp_path, trace)
    replayed = cli("replay", str(imported), "--target", http_server.url, "--report", str(tmp_path / "r.json"))
    assert replayed.returncode == 0, replayed.stdout.decode() + replayed.stderr.decode()
    report = orjson.loads((tmp_path / "r.json").read_bytes())
    assert report  # the replay compared the imported calls with the live server's answers
    # The mock serves it: the recorded answer to the recorded call.
    call = next(e["msg"] for e in read_trace(imported) if e["kind"] == "message" and e["msg"].get("method") == "tools/call")
    answer = next(e["msg"] for e in read_trace(imported) if e["kind"] == "message" and e["dir"] == "s2c" and e["msg"].get("id") == call["id"])
    init = {"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    lines = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call]
    served = subprocess.run([sys.executable, "-m", "mcpbench", "serve-trace", str(imported), "--pace", "fast"],
                            input=b"".join(orjson.dumps(m) + b"\n" for m in lines), capture_output=True, timeout=WAIT)
    got = {m["id"]: m for m in map(orjson.loads, served.stdout.splitlines())}
    assert got[call["id"]]["result"] == answer["result"]


def har_of(*entries: dict) -> bytes:
    return orjson.dumps({"log": {"version": "1.2", "creator": {"name": "test", "version": "1"}, "entries": list(entries)}})


def page_entry(url: str = "http://127.0.0.1:9/index.html") -> dict:
    return {
        "startedDateTime": "2026-12-06T10:00:00.000Z", "time": 5,
        "request": {"method": "GET", "url": url, "httpVersion": "HTTP/1.1", "headers": [{"name": "accept", "value": "text/html"}],
                    "cookies": [], "queryString": [], "headersSize": -1, "bodySize": 0},
        "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "cookies": [], "redirectURL": "",
                     "headers": [{"name": "content-type", "value": "text/html"}],
                     "content": {"size": 13, "mimeType": "text/html", "text": "<p>hello</p>"}, "headersSize": -1, "bodySize": 13},
        "cache": {}, "timings": {"send": 0, "wait": 4, "receive": 1},
    }


def mcp_entry() -> dict:
    entry = page_entry("http://127.0.0.1:9/mcp")
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    entry["request"] |= {"method": "POST", "headers": [{"name": "content-type", "value": "application/json"},
                                                       {"name": "mcp-session-id", "value": "abc"}],
                         "postData": {"mimeType": "application/json", "text": orjson.dumps(request).decode()}}
    entry["response"] |= {"headers": [{"name": "content-type", "value": "application/json"}],
                          "content": {"size": 40, "mimeType": "application/json"}}  # the body left out, as browsers do
    return entry


@pytest.mark.parametrize("case", ["no-mcp", "truncated", "not-a-har", "out-not-a-trace"])
def test_bad_har_is_one_line_exit_2_and_nothing_written(tmp_path, case):
    har = tmp_path / "in.har"
    if case == "no-mcp":
        har.write_bytes(har_of(page_entry()))
        expected = "no MCP exchange in this HAR (1 entries)"
    elif case == "truncated":
        data = har_of(mcp_entry(), mcp_entry())
        har.write_bytes(data[: len(data) // 2])
        expected = "not a HAR file: not JSON at byte"
    elif case == "not-a-har":
        har.write_bytes(b'{"entries": []}')
        expected = "not a HAR file: no log.entries"
    else:
        har.write_bytes(har_of(mcp_entry()))
        expected = "exists and is not a trace: refusing to overwrite it"
    out = tmp_path / "out.jsonl"
    if case == "out-not-a-trace":
        out.write_text("my notes\n")
    done = cli("trace", "import", "--har", str(har), "--out", str(out))
    stderr = done.stderr.decode()
    assert done.returncode == 2 and expected in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert str(out if case == "out-not-a-trace" else har) in stderr
    assert sorted(tmp_path.iterdir()) == sorted([har, *([out] if case == "out-not-a-trace" else [])])
    if case == "out-not-a-trace":
        assert out.read_text() == "my notes\n"


def test_what_the_har_left_out_is_said_not_invented(tmp_path):
    har = tmp_path / "in.har"
    cut = mcp_entry()
    cut["startedDateTime"] = "2026-12-06T10:00:01.000Z"
    cut["request"]["postData"]["text"] = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo"}}'
    cut["response"] |= {"status": 0, "statusText": "", "headers": [], "content": {"size": 0, "mimeType": ""}}
    cut["comment"] = "error: net::ERR_CONNECTION_RESET"
    har.write_bytes(har_of(page_entry(), mcp_entry(), cut))
    out = tmp_path / "out.jsonl"
    done = cli("trace", "import", "--har", str(har), "--out", str(out))
    assert done.returncode == 0, done.stderr
    said = done.stderr.decode()
    assert "1 answer(s) whose body the HAR left out" in said and "1 exchange(s) without an answer in the HAR" in said
    events = list(read_trace(out))
    assert [e["msg"]["method"] for e in events if e["kind"] == "message"] == ["tools/list", "tools/call"]  # no answer made up
    http = [e for e in events if e["kind"] == "http"]
    assert [(e["mcp"], e["status"]) for e in http] == [(False, 200), (True, 200), (True, None)]
    assert [e["detail"] for e in events if e["kind"] == "error"] == ["net::ERR_CONNECTION_RESET"]
    assert events[0]["recorder"] == "har" and events[0]["started"].startswith("2026-12-06T10:00:00")


def chromium_page_har(origin: str, script: str):
    """(the HAR, the script's value) of a headless Chromium page of `origin` running `script`."""
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium on this machine")
    return page_session_har(chromium, origin, script)


def import_devtools_har(tmp_path: Path, har: dict) -> tuple[Path, subprocess.CompletedProcess]:
    (tmp_path / "devtools.har").write_bytes(orjson.dumps(har))
    out = tmp_path / "imported.jsonl"
    done = cli("trace", "import", "--har", str(tmp_path / "devtools.har"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, done


# The page's MCP client: a Streamable HTTP session with fetch(), as a web app talks to a server of
# its own origin (the page is served from it, so no CORS is involved).
PAGE_SESSION = """(async () => {
  const base = {'content-type': 'application/json', 'accept': 'application/json, text/event-stream'};
  const post = async (headers, message) => {
    const answer = await fetch('/mcp', {method: 'POST', headers, body: JSON.stringify(message)});
    return [answer, await answer.text()];
  };
  const [first] = await post(base, {jsonrpc: '2.0', id: 1, method: 'initialize', params: {
    protocolVersion: '2025-06-18', capabilities: {}, clientInfo: {name: 'page', version: '1'}}});
  const headers = {...base, 'mcp-session-id': first.headers.get('mcp-session-id'), 'mcp-protocol-version': '2025-06-18'};
  await post(headers, {jsonrpc: '2.0', method: 'notifications/initialized'});
  const [, tools] = await post(headers, {jsonrpc: '2.0', id: 2, method: 'tools/list'});
  const [, echo] = await post(headers, {jsonrpc: '2.0', id: 3, method: 'tools/call', params: {name: 'echo', arguments: {text: 'h\u00e9llo'}}});
  await (await fetch('/mcp', {method: 'DELETE', headers})).text();
  return {session: headers['mcp-session-id'], tools, echo};
})()"""


@pytest.mark.slow
def test_a_har_chromium_wrote_of_a_page_talking_to_a_local_server_imports(http_server, tmp_path):
    har, page = chromium_page_har(http_server.url.removesuffix("/mcp"), PAGE_SESSION)
    out, done = import_devtools_har(tmp_path, har)
    misread = "h\u00c3\u00a9llo" in (tmp_path / "devtools.har").read_text()  # DevTools' text of an event stream without charset
    assert misread == ("decoded as latin-1" in done.stderr.decode())
    events = list(read_trace(out))
    messages = [e for e in events if e["kind"] == "message"]
    assert {e["session"] for e in messages} == {page["session"]}
    c2s = [e["msg"].get("method") for e in messages if e["dir"] == "c2s"]
    assert c2s == ["initialize", "notifications/initialized", "tools/list", "tools/call"]
    answers = {e["msg"]["id"]: e["msg"] for e in messages if e["dir"] == "s2c"}
    assert answers[3]["result"]["content"][0]["text"] == "h\u00e9llo"  # as the page read it
    assert "h\u00e9llo" in page["echo"]
    # The page itself (a 404 from the server) is in the HAR and the trace, as an exchange that is not MCP.
    assert [(e["method"], e["mcp"]) for e in events if e["kind"] == "http"][0] == ("GET", False)
    report = summarize(str(out))
    assert [len(s.calls) for s in report.sessions if s.calls] == [3]
    assert not any(s.of_kind("violation") for s in report.sessions)


# The page's legacy HTTP+SSE client: an EventSource on /sse, and fetch() POSTs to its endpoint.
PAGE_LEGACY_SESSION = """(async () => {
  const stream = new EventSource('/sse');
  const endpoint = await new Promise(r => stream.addEventListener('endpoint', e => r(e.data)));
  const got = [];
  const answered = new Promise(r => stream.addEventListener('message', e => { got.push(e.data); if (got.length >= 2) r(); }));
  const post = m => fetch(endpoint, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify(m)}).then(a => a.text());
  await post({jsonrpc: '2.0', id: 1, method: 'initialize', params: {
    protocolVersion: '2024-11-05', capabilities: {}, clientInfo: {name: 'page', version: '1'}}});
  await post({jsonrpc: '2.0', method: 'notifications/initialized'});
  await post({jsonrpc: '2.0', id: 2, method: 'tools/list'});
  await answered;
  stream.close();
  return got.length;
})()"""


@pytest.mark.slow
def test_a_chromium_har_of_an_eventsource_says_what_it_lacks(sse_server, tmp_path):
    """Chromium's DevTools keeps no body for an EventSource: the import says so rather than guess."""
    har, answers = chromium_page_har(sse_server.url.removesuffix("/sse"), PAGE_LEGACY_SESSION)
    assert answers == 2  # the page had its answers on the stream
    stream = next(e for e in har["log"]["entries"] if e["request"]["url"].endswith("/sse"))
    assert not stream["response"]["content"].get("text")
    out, done = import_devtools_har(tmp_path, har)
    assert "1 GET event stream(s) without a body in the HAR" in done.stderr.decode()
    messages = [e for e in read_trace(out) if e["kind"] == "message"]
    assert [e["msg"].get("method") for e in messages] == ["initialize", "notifications/initialized", "tools/list"]
    assert all(e["dir"] == "c2s" for e in messages)  # no answer made up
