"""`mcpbench record` in front of an https server whose certificate a private CA signed, and `replay` against it."""

import contextlib
import datetime
import ipaddress
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mcpbench.trace.reader import read_trace
from tests.record.helpers import record_command
from tests.support.servers import HOST, REPO_ROOT, free_port, stop_process, wait_for_port

TLS_SERVER = Path(__file__).with_name("tls_server.py")


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A private CA, and a certificate for 127.0.0.1 it signed: (ca.pem, cert.pem, key.pem)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject: str, key, issuer: str, signer, *extensions) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = certificate("mcpbench test CA", ca_key, "mcpbench test CA", ca_key, (x509.BasicConstraints(ca=True, path_length=None), True))
    leaf = certificate(
        HOST, key, "mcpbench test CA", ca_key,
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]), False),
    )
    paths = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return paths


@pytest.fixture(scope="module")
def tls_upstream(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """The reference server over TLS: (its https URL, the CA that signed its certificate)."""
    ca, cert, key = _certificates(tmp_path_factory.mktemp("tls"))
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(TLS_SERVER), str(port), str(cert), str(key)], cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    try:
        wait_for_port(HOST, port, proc=proc)
        yield f"https://{HOST}:{port}/mcp", ca
    finally:
        stop_process(proc)


def _call_echo(url: str) -> str:
    from mcp import Client

    async def main() -> str:
        with anyio.fail_after(30):
            async with Client(url, mode="legacy") as client:
                return (await client.call_tool("echo", {"text": "hi"})).content[0].text

    return anyio.run(main)


@contextlib.contextmanager
def _recording(upstream: str, out: Path, *options: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """`record_command`, stopped with SIGTERM at the block's end and checked to have ended well."""
    with record_command(upstream, out, *options) as (proc, url):
        yield proc, url
        proc.terminate()
        assert proc.wait(15) == 143  # 128 + SIGTERM, the trace complete


@pytest.mark.parametrize("option", ["--upstream-ca", "--upstream-insecure"])
def test_a_private_ca_upstream_is_recorded_with_either_option(tmp_path: Path, tls_upstream, option: str) -> None:
    upstream, ca = tls_upstream
    out = tmp_path / "t.jsonl"
    options = [option, str(ca)] if option == "--upstream-ca" else [option]
    with _recording(upstream, out, *options) as (proc, url):
        assert _call_echo(url) == "hi"
    assert b"warning" not in proc.stderr.read()
    events = list(read_trace(out))
    assert any(e["kind"] == "message" and e["msg"].get("method") == "tools/call" for e in events)
    assert not [e for e in events if e["kind"] == "error"]


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_the_recording_replays_against_it_once_its_ca_is_trusted(tmp_path: Path, tls_upstream) -> None:
    upstream, ca = tls_upstream
    out = tmp_path / "t.jsonl"
    with _recording(upstream, out, "--upstream-ca", str(ca)) as (_, url):
        assert _call_echo(url) == "hi"
    replay = [sys.executable, "-m", "mcpbench", "replay", str(out), "--target", upstream]
    untrusted = subprocess.run(replay, cwd=REPO_ROOT, capture_output=True, timeout=120)
    assert untrusted.returncode == 3  # the target could not be reached
    assert b"its certificate is not trusted" in untrusted.stderr and b"SSL_CERT_FILE=FILE" in untrusted.stderr
    trusted = subprocess.run(replay, cwd=REPO_ROOT, capture_output=True, timeout=120, env={**os.environ, "SSL_CERT_FILE": str(ca)})
    assert trusted.returncode == 0, trusted.stdout  # every answer as recorded
    assert re.search(rb"calls: [1-9]\d* identical, 0 changed, 0 missing, 0 extra, 0 failed", trusted.stdout), trusted.stdout


def test_without_them_the_start_says_how_and_each_request_is_recorded_as_refused(tmp_path: Path, tls_upstream) -> None:
    import httpx2

    upstream, _ = tls_upstream
    out = tmp_path / "t.jsonl"
    with _recording(upstream, out) as (proc, url):
        answer = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
        assert answer.status_code == 502
    warning = proc.stderr.read().decode().splitlines()[0]
    assert "certificate" in warning and "--upstream-ca FILE" in warning and "--upstream-insecure" in warning
    errors = [e for e in read_trace(out) if e["kind"] == "error"]
    assert errors and "Certificate verify failed" in errors[0]["detail"]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--upstream", "https://127.0.0.1:9/mcp", "--upstream-ca", "missing.pem"], "missing.pem: No such file or directory"),
        (["--upstream", "https://127.0.0.1:9/mcp", "--upstream-ca", "pyproject.toml"], "pyproject.toml: no PEM certificate in it"),
        (["--upstream", "http://127.0.0.1:9/mcp", "--upstream-insecure"], "--upstream-insecure is for an https:// upstream"),
    ],
)
def test_unusable_tls_options_are_one_line_and_exit_2(options: list[str], said: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mcpbench", "record", "--listen", f"{HOST}:0", *options],
        cwd=REPO_ROOT, capture_output=True, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.decode().count("\n") == 1 and said in proc.stderr.decode(), proc.stderr
