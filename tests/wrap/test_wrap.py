"""`mcpbench wrap` / `unwrap` on host configs in the shapes each host writes, in a temporary home.

Each config is wrapped and unwrapped byte for byte; a wrapped entry's command is started as a host
starts it (argv from the JSON, its env added) and answers through the tee, the trace written.
"""

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from mcpbench.cli import main
from mcpbench.trace import read_trace
from mcpbench.wrap.edit import MARK
from mcpbench.wrap.jsonc import parse
from tests.support.servers import serve_argv
from tests.wrap.helpers import HTTP_SERVERS, STDIO_SERVERS, contents, lay_out, strip_jsonc

# A bound for any one wait; no timing is asserted.
WAIT = 60.0


def run(*args, home, project):
    result = CliRunner().invoke(main, [*args, "--home", str(home), "--project", str(project)], catch_exceptions=False)
    return result.exit_code, result.output


def load(path: Path, data: bytes | None = None) -> dict:
    """A config as the standard parser reads it (VS Code's JSONC without its comments)."""
    text = (path.read_bytes() if data is None else data).decode("utf-8-sig")
    return json.loads(strip_jsonc(text) if path.parent.name == ".vscode" else text)


def servers_of(path: Path, data: bytes | None = None) -> dict:
    config = load(path, data)
    found = dict(config.get("servers") or config.get("mcpServers") or {})
    for project in (config.get("projects") or {}).values():
        found.update(project.get("mcpServers", {}))
    return found


def without_servers(path: Path, data: bytes | None = None) -> dict:
    config = load(path, data)
    for key in ("servers", "mcpServers"):
        config.pop(key, None)
    for project in (config.get("projects") or {}).values():
        project.pop("mcpServers", None)
    return config


def test_status_finds_every_host_config(tmp_path):
    home, project, files = lay_out(tmp_path)
    status, out = run("wrap", "--status", home=home, project=project)
    assert status == 0
    for path in files:
        assert str(path) in out
    for name in STDIO_SERVERS:
        assert f"  {name}: stdio, not wrapped" in out or f"  {name} (project /home/alice/app): stdio, not wrapped" in out
    for name in HTTP_SERVERS:
        assert f"  {name}: an HTTP server" in out
    assert contents(files) == files


def test_wrap_all_then_unwrap_restores_every_file_byte_for_byte(tmp_path):
    home, project, files = lay_out(tmp_path)
    traces = tmp_path / "traces"
    status, out = run("wrap", "--all", "--traces", str(traces), home=home, project=project)
    assert status == 0, out
    wrapped = contents(files)
    assert all(wrapped[path] != files[path] for path in files)
    for path in files:
        # Every key mcpbench does not own is as it was; each stdio server runs the tee, HTTP ones are untouched.
        assert without_servers(path) == without_servers(path, files[path])
        before = servers_of(path, files[path])
        for name, entry in servers_of(path).items():
            old = before[name]
            if "url" in old or "serverUrl" in old:
                assert entry == old
                continue
            assert Path(entry["command"]).is_absolute()
            args = entry["args"]
            assert args[args.index("--wrapped-by") + 1] == MARK
            assert args[args.index("--out") + 1] in (str(traces / f"{name}.jsonl"), str(traces / f"{name}-2.jsonl"))
            assert args[args.index("--") + 1:] == [old["command"], *old.get("args", [])]
            assert {k: v for k, v in entry.items() if k not in ("command", "args")} == {k: v for k, v in old.items() if k not in ("command", "args")}
    # Each wrapped entry has a trace of its own: `filesystem` is in Claude Desktop's and Cursor's configs.
    outs = [entry["args"][entry["args"].index("--out") + 1] for path in files for entry in servers_of(path).values() if "--out" in entry.get("args", [])]
    assert len(outs) == len(set(outs)) == len(STDIO_SERVERS) + 1
    assert str(traces / "filesystem-2.jsonl") in outs
    # The text around the entries is kept: comments, the byte order mark, CRLF line ends, tabs.
    vscode = (project / ".vscode/mcp.json").read_text()
    assert "// 💡 Inputs are prompted" in vscode and "/* a remote one */" in vscode
    windows = (home / "AppData/Roaming/Claude/claude_desktop_config.json").read_bytes()
    assert windows.startswith(b"\xef\xbb\xbf{\r\n\t\"mcpServers\"") and b"\n" not in windows.replace(b"\r\n", b"")
    for name in HTTP_SERVERS:
        assert f"{name}: an HTTP server" in out and "mcpbench record --upstream" in out

    # Wrapping twice changes nothing.
    status, out = run("wrap", "--all", "--traces", str(traces), home=home, project=project)
    assert status == 0 and "already wrapped" in out and "nothing to change" in out
    assert contents(files) == wrapped

    status, out = run("wrap", "--status", home=home, project=project)
    assert f"weather: wrapped, trace {traces / 'weather.jsonl'} (not written yet)" in out

    status, out = run("unwrap", "--all", home=home, project=project)
    assert status == 0, out
    assert contents(files) == files
    # Backups of each file as it was before each write (0600: an entry's env may hold secrets).
    backups = list((home / ".mcpbench/wrap/backups").iterdir())
    assert len(backups) == 2 * len(files)
    assert {b.read_bytes() for b in backups} == set(files.values()) | set(wrapped.values())
    assert all(b.stat().st_mode & 0o077 == 0 for b in backups)


def test_named_server_dry_run_shows_a_diff_and_writes_nothing(tmp_path):
    home, project, files = lay_out(tmp_path)
    status, out = run("wrap", "weather", "--dry-run", home=home, project=project)
    assert status == 0
    assert '-      "command": "uv",' in out and '+      "args": ["tee", "--wrapped-by"' in out
    assert contents(files) == files
    assert not (home / ".mcpbench").exists()


def test_only_the_named_server_changes_and_later_edits_elsewhere_survive_unwrap(tmp_path):
    home, project, files = lay_out(tmp_path)
    config = home / "Library/Application Support/Claude/claude_desktop_config.json"
    assert run("wrap", "weather", home=home, project=project)[0] == 0
    assert servers_of(config)["filesystem"]["command"] == "npx"
    # The user changes another key meanwhile: unwrap restores the entry and keeps the change.
    text = config.read_text().replace('"Alt+Space"', '"Ctrl+Space"')
    config.write_text(text)
    assert run("unwrap", "weather", home=home, project=project)[0] == 0
    assert config.read_bytes() == files[config].replace(b'"Alt+Space"', b'"Ctrl+Space"')


def test_an_entry_edited_after_wrapping_is_unwrapped_from_its_command_line(tmp_path):
    home, project, files = lay_out(tmp_path)
    config = project / ".cursor/mcp.json"
    assert run("wrap", "bare", home=home, project=project)[0] == 0
    config.write_text(config.read_text().replace('"bare": { "command"', '"bare": { "env": {"A": "1"}, "command"'))
    status, out = run("unwrap", "bare", home=home, project=project)
    assert status == 0 and "from its command line" in out
    assert servers_of(config)["bare"] == {"env": {"A": "1"}, "command": "my-mcp-server", "args": []}


def _one_line_refusal(tmp_path, files, home, project, *args):
    result = subprocess.run(
        [sys.executable, "-m", "mcpbench", *args, "--home", str(home), "--project", str(project)],
        capture_output=True, text=True, timeout=WAIT,
    )
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("mcpbench: ")
    assert "Traceback" not in result.stderr
    return result.stderr


@pytest.mark.parametrize("case", ["not-json", "comment-in-json", "unknown-shape", "foreign-version", "read-only", "no-such-server"])
def test_bad_input_is_one_line_exit_2_and_no_file_changes(tmp_path, case):
    home, project, files = lay_out(tmp_path)
    cursor = home / ".cursor/mcp.json"
    args = ["wrap", "--all"]
    if case == "not-json":
        cursor.write_text('{"mcpServers": {"browser": {"command": "npx",}}')
        expected = f"{cursor}: line 1 column 46: an object key (a string) expected"
    elif case == "comment-in-json":
        cursor.write_text('{\n  // a comment\n  "mcpServers": {}\n}\n')
        expected = f"{cursor}: line 2 column 3: a comment (JSON has none)"
    elif case == "unknown-shape":
        cursor.write_text('{"mcpServers": {"odd": {"cmd": ["npx", "x"]}}}')
        expected = "server odd: an entry of unknown shape (neither a `command` string nor a `url`)"
    elif case == "foreign-version":
        cursor.write_text(json.dumps({"mcpServers": {"old": {"command": "/opt/mcpbench", "args": [
            "tee", "--wrapped-by", "mcpbench-wrap/9", "--out", "/tmp/x.jsonl", "--", "npx", "x"]}}}))
        expected = "wrapped by another mcpbench (mcpbench-wrap/9; this one writes mcpbench-wrap/1)"
    elif case == "read-only":
        cursor.chmod(0o444)
        expected = f"{cursor}: read-only"
    else:
        args = ["wrap", "nowhere"]
        expected = "no server named nowhere"
    files[cursor] = cursor.read_bytes()
    stderr = _one_line_refusal(tmp_path, files, home, project, *args)
    assert expected in stderr and "nothing written" in stderr
    assert contents(files) == files  # the other configs were not written either
    assert not (home / ".mcpbench" / "wrap" / "ledger.json").exists()


def test_unwrap_refuses_another_versions_entry(tmp_path):
    home, project, files = lay_out(tmp_path)
    cursor = home / ".cursor/mcp.json"
    cursor.write_text(json.dumps({"mcpServers": {"old": {"command": "/opt/mcpbench", "args": [
        "tee", "--wrapped-by", "mcpbench-wrap/0", "--", "npx", "x"]}}}))
    files[cursor] = cursor.read_bytes()
    stderr = _one_line_refusal(tmp_path, files, home, project, "unwrap", "--all")
    assert "mcpbench-wrap/0" in stderr
    assert contents(files) == files


@pytest.mark.slow
def test_a_wrapped_entry_runs_as_a_host_runs_it(tmp_path):
    """The host's view: argv is `command` + `args` from the JSON, env is its own plus the entry's."""
    home, project = tmp_path / "home", tmp_path / "project"
    config = project / ".mcp.json"
    config.parent.mkdir(parents=True)
    server = serve_argv("stdio")
    config.write_text(json.dumps({"mcpServers": {"ref": {
        "type": "stdio", "command": server[0], "args": server[1:], "env": {"MCPBENCH_WRAP_TEST": "1"}}}}, indent=2))
    traces = tmp_path / "traces"
    assert run("wrap", "ref", "--traces", str(traces), home=home, project=project)[0] == 0
    entry = json.loads(config.read_text())["mcpServers"]["ref"]
    assert entry["command"] != server[0]
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    env = {**os.environ, **entry["env"]}
    proc = subprocess.Popen([entry["command"], *entry["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=project)
    answers = {}
    try:
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
        for request in requests:
            proc.stdin.write(orjson.dumps(request) + b"\n")
            proc.stdin.flush()
            if "id" in request:  # as a host does: the next request once this one is answered
                while request["id"] not in answers:
                    message = orjson.loads(lines.get(timeout=WAIT))
                    answers[message.get("id")] = message
        proc.stdin.close()  # EOF: the server ends, and the tee with it
        assert proc.wait(timeout=WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT)
    assert answers[1]["result"]["protocolVersion"] == "2025-06-18"
    assert "echo" in {tool["name"] for tool in answers[2]["result"]["tools"]}
    events = list(read_trace(traces / "ref.jsonl"))
    assert events[0]["command"] == server
    methods = [e["msg"].get("method") for e in events if e["kind"] == "message" and e["dir"] == "c2s"]
    assert methods == ["initialize", "notifications/initialized", "tools/list"]
    assert any(e["kind"] == "message" and e["dir"] == "s2c" and e["msg"].get("id") == 2 for e in events)
    status, out = run("wrap", "--status", home=home, project=project)
    assert f"ref: wrapped, trace {traces / 'ref.jsonl'} (" in out and "not written yet" not in out


def test_jsonc_spans_point_at_the_values():
    text = '{\n  // c\n  "a": [1, "x", {"b": null}],\n}'
    root = parse(text, "t.json", comments=True)
    start_key, node = root.members["a"]
    assert text[start_key:start_key + 3] == '"a"'
    assert text[node.start:node.end] == '[1, "x", {"b": null}]'
    assert node.value == [1, "x", {"b": None}]


def test_an_entry_put_through_the_tee_by_hand_is_left_alone(tmp_path):
    home, project, files = lay_out(tmp_path)
    cursor = home / ".cursor/mcp.json"
    cursor.write_text(json.dumps({"mcpServers": {"weather": {"command": "/opt/venv/bin/mcpbench", "args": [
        "tee", "--out", "/tmp/weather.jsonl", "--", "python", "-m", "weather_server"]}}}, indent=2))
    files[cursor] = cursor.read_bytes()
    status, out = run("wrap", "--all", "--host", "cursor", home=home, project=project)
    assert status == 0 and "weather: runs through `mcpbench tee` already" in out
    assert cursor.read_bytes() == files[cursor]
    assert "cursor (project) project-tools: wrapped" in out  # --host cursor: both of Cursor's files, no other host's
    assert "claude-desktop" not in out


def test_unwrap_after_the_host_rewrote_its_file_gives_the_hosts_own_layout_back(tmp_path):
    """Claude Code rewrites ~/.claude.json (JSON.stringify, 2 spaces): the wrapped entry's one-line
    args come back multi-line, and unwrap still puts the original entry back, in that same layout."""
    home, project, files = lay_out(tmp_path)
    config = home / ".claude.json"
    assert run("wrap", "github", "local-notes", home=home, project=project)[0] == 0
    config.write_text(json.dumps(json.loads(config.read_text()), indent=2, ensure_ascii=False) + "\n")
    status, out = run("unwrap", "--all", home=home, project=project)
    assert status == 0 and "from its command line" not in out
    assert config.read_bytes() == files[config]
