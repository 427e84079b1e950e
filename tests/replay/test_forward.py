"""`serve-trace --on-miss forward URL`: recorded calls from the trace, the rest from a live reference server."""

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.replay.conftest import MODES, QUESTION, SAMPLED_PREFIX, cli, sample
from tests.replay.test_serve_trace import TIMEOUT, mock_server, text_of
from tests.support.servers import stdio_params

# The recorded echo answer is rewritten, so an answer from the trace cannot pass for a live one.
RECORDED = "recorded héllo"


def doctored(trace: Path, out: Path) -> Path:
    """`trace` with the answer to echo "héllo" changed to RECORDED."""
    text = trace.read_text(encoding="utf-8")
    changed = text.replace('{"text":"héllo","type":"text"}', '{"text":"%s","type":"text"}' % RECORDED).replace(
        '"structuredContent":{"result":"héllo"}', '"structuredContent":{"result":"%s"}' % RECORDED
    )
    assert changed != text, "the recording's echo answer has another shape"
    out.write_text(changed, encoding="utf-8")
    return out


async def check_forwarding(target: Any, mode: str) -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(target, mode=mode, sampling_callback=sample) as client:
            assert text_of(await client.call_tool("echo", {"text": "héllo"})) == RECORDED
            assert text_of(await client.call_tool("echo", {"text": "never recorded"})) == "never recorded"
            assert text_of(await client.call_tool("add", {"a": 20, "b": 3})) == "23"
            # The live server's sampling request reaches the SDK client through the mock.
            answer = await client.call_tool("ask", {"question": "live " + QUESTION})
            assert text_of(answer) == SAMPLED_PREFIX + "live " + QUESTION


@pytest.mark.parametrize("mode", MODES)
def test_unrecorded_requests_get_the_live_answer(recordings, http_server, tmp_path, mode):
    trace = doctored(recordings[mode], tmp_path / "doctored.jsonl")
    argv = [sys.executable, "-m", "mcpbench", "serve-trace", str(trace), "--on-miss", "forward", http_server.url]
    anyio.run(check_forwarding, stdio_params(argv), mode)


def test_forwarding_from_streamable_http(recordings, http_server, tmp_path):
    trace = doctored(recordings["legacy"], tmp_path / "doctored.jsonl")
    with mock_server(trace, "streamable-http", "--on-miss", "forward", http_server.url) as url:
        anyio.run(check_forwarding, url, "legacy")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/mcp", "stdio:", "http://"])
def test_a_bad_forward_url_is_one_line_and_exit_2(recordings, url):
    done = cli("serve-trace", str(recordings["legacy"]), "--on-miss", "forward", url, timeout=30)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("mcpbench: "), done.stderr
