"""Hosts for tests: network namespaces on a bridge, each its own address, as separate machines would be.

`Lan(names)` makes a bridge and one namespace per name (a veth pair each: one end on the bridge, the
other in the namespace with its address on a /24 of its own), and gives the test process an
address on the bridge too, so it can wait on the hosts' ports. `lan.start(name, argv)` runs a
command on a host (`ip netns exec`, in a session of its own); `close()` kills every process
started that way, then removes the namespaces and the bridge, whatever happened before. Needs
root and the `ip` command; `Lan.unavailable()` says why a machine cannot make one.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
from collections.abc import Sequence

from tests.support.servers import REPO_ROOT

# Every `ip` call is quick; one that takes longer is stuck.
IP_TIMEOUT = 10
# The test process's own address on the bridge (the hosts get .1, .2, …).
OBSERVER = 254


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT)


class Lan:
    """A bridge and hosts on it; use as a context manager (or call `close`)."""

    @staticmethod
    def unavailable() -> str | None:
        """Why network namespaces cannot be made here (one line), or None."""
        if shutil.which("ip") is None:
            return "no `ip` command (iproute2) to make network namespaces"
        if os.geteuid() != 0:
            return "network namespaces need root"
        probe = f"mcbprobe{os.getpid()}"
        made = _ip("netns", "add", probe)
        if made.returncode != 0:
            return f"cannot make a network namespace: {made.stderr.strip() or made.returncode}"
        _ip("netns", "del", probe)
        return None

    def __init__(self, names: Sequence[str]) -> None:
        tag = f"{os.getpid() % 100000}{random.randrange(100)}"
        self.bridge = f"mcb{tag}"
        self.subnet = f"10.{random.randrange(200, 250)}.{random.randrange(256)}"
        self.namespaces: dict[str, str] = {}
        self.links: list[str] = []  # the bridge's ends of the veth pairs
        self.addresses: dict[str, str] = {}
        self.processes: list[subprocess.Popen] = []
        self.observer = f"{self.subnet}.{OBSERVER}"
        try:
            self._run("link", "add", self.bridge, "type", "bridge")
            self._run("addr", "add", f"{self.observer}/24", "dev", self.bridge)
            self._run("link", "set", self.bridge, "up")
            for number, name in enumerate(names, start=1):
                self._add_host(name, number, tag)
        except BaseException:
            self.close()
            raise

    def _run(self, *args: str) -> None:
        done = _ip(*args)
        if done.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")

    def _add_host(self, name: str, number: int, tag: str) -> None:
        namespace, outside, inside = f"mcb{tag}n{number}", f"mcb{tag}v{number}", f"mcb{tag}p{number}"
        address = f"{self.subnet}.{number}"
        self._run("netns", "add", namespace)
        self.namespaces[name] = namespace
        self._run("link", "add", outside, "type", "veth", "peer", "name", inside)
        self.links.append(outside)
        self._run("link", "set", inside, "netns", namespace)
        self._run("link", "set", outside, "master", self.bridge)
        self._run("link", "set", outside, "up")
        self._run("-n", namespace, "addr", "add", f"{address}/24", "dev", inside)
        self._run("-n", namespace, "link", "set", inside, "up")
        self._run("-n", namespace, "link", "set", "lo", "up")
        self.addresses[name] = address

    def start(self, name: str, argv: Sequence[str], **popen: object) -> subprocess.Popen:
        """Run `argv` on host `name` (from the repository, in a session of its own: `kill_host` ends all of it)."""
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.namespaces[name], *argv], cwd=REPO_ROOT, start_new_session=True,
            stdin=subprocess.DEVNULL, **popen,
        )
        self.processes.append(proc)
        return proc

    @staticmethod
    def kill(proc: subprocess.Popen) -> None:
        """SIGKILL a process started with `start` and everything in its session, as a machine dying would."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def close(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                self.kill(proc)
            else:  # its own processes may have outlived it
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for proc in self.processes:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        for link in self.links:  # the pair goes at once (a namespace's own links go later, in the background)
            _ip("link", "del", link)
        for namespace in self.namespaces.values():
            _ip("netns", "del", namespace)
        _ip("link", "del", self.bridge)
        self.links.clear()
        self.namespaces.clear()

    def __enter__(self) -> Lan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def leftovers(lan: Lan) -> list[str]:
    """Links and namespaces of `lan` still on the machine (after `close`: none)."""
    links = _ip("-o", "link").stdout
    names = _ip("netns", "list").stdout
    tag = lan.bridge
    return [line.split()[1] for line in links.splitlines() if tag in line] + [n for n in names.split() if n.startswith(tag)]

