"""Load from several machines: a master and workers on hosts of their own (network namespaces on a
bridge), the reference server on another; and the one-line failures of a master or worker that
cannot work (on 127.0.0.1).

Each worker's steps carry session tags `<pid>-<n>` (pids are unique: the hosts share one process
namespace), so the lines of the master's samples.jsonl are counted per worker and held against
what the master says it received from each, and what each worker says it sent.
"""

import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
import yaml

from mcpbench import __version__
from tests.support.netns import Lan, leftovers
from tests.support.processes import wait_for_lines
from tests.support.servers import REPO_ROOT, free_port, wait_for_port

# A run: Locust's start on each host, a few seconds of load, the master's drain and end.
RUN_TIMEOUT = 120
# Ports inside the hosts (each host has a port space of its own).
SERVER_PORT, FAULTS_PORT, MASTER_PORT = 8101, 8102, 5557
JOINED = re.compile(r"^mcpbench: worker (\S+) joined the master at ")
SENT = re.compile(r"^mcpbench: worker (\S+) sent (\d+) samples to the master at .*, (\d+) dropped$")

MIX = 'mix: [{call: tools/call, tool: echo, arguments: {text: "{{string 32}}"}, weight: 3}, {call: tools/list}]\n'


def mcpbench(*args) -> list[str]:
    return [sys.executable, "-m", "mcpbench", *map(str, args)]


@pytest.fixture(scope="module")
def lan():
    """Hosts `master`, `w1`, `w2` and `server` (the reference server, and a fault proxy before it)."""
    if reason := Lan.unavailable():
        pytest.skip(reason)
    with Lan(["master", "w1", "w2", "server"]) as hosts:
        server = hosts.addresses["server"]
        serve = hosts.start("server", mcpbench("lab", "serve", "--transport", "streamable-http", "--host", server, "--port", SERVER_PORT),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(server, SERVER_PORT, proc=serve)
        # Drops, for the reconnect run: each a break the users' reconnect policy recovers from.
        faults = hosts.start("server", mcpbench("faults", "--upstream", f"http://{server}:{SERVER_PORT}/mcp", "--listen", f"{server}:{FAULTS_PORT}",
                                                "--drop", "10%", "--drop-as", "reset", "--seed", "1"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(server, FAULTS_PORT, proc=faults)
        yield hosts
    assert leftovers(hosts) == []


class Fleet:
    """A master and its workers on their hosts, each `mcpbench load`, started together."""

    def __init__(self, lan: Lan, tmp_path: Path, scenario: str, workers=("w1", "w2")) -> None:
        self.lan = lan
        self.out = tmp_path / "out"
        path = tmp_path / "scenario.yaml"
        path.write_text(scenario)
        master = lan.addresses["master"]
        self.master = lan.start("master", mcpbench("load", path, "--master", "--expect-workers", len(workers),
                                                   "--master-bind", f"{master}:{MASTER_PORT}", "--out", self.out),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.workers = {
            host: lan.start(host, mcpbench("load", "--worker", "--master-host", master, "--master-port", MASTER_PORT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for host in workers
        }

    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc: object) -> None:
        """Whatever happened, none of the run's processes outlives it (the next run needs the master's port)."""
        for proc in [self.master, *self.workers.values()]:
            if proc.poll() is None:
                Lan.kill(proc)

    def finish(self) -> tuple[subprocess.CompletedProcess, dict[str, subprocess.CompletedProcess]]:
        done = {}
        for host, proc in self.workers.items():
            stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
            done[host] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        stdout, stderr = self.master.communicate(timeout=RUN_TIMEOUT)
        return subprocess.CompletedProcess(self.master.args, self.master.returncode, stdout, stderr), done

    def summary(self) -> dict:
        return orjson.loads((self.out / "summary.json").read_bytes())

    def lines_per_pid(self) -> Counter:
        """The master's samples.jsonl lines, by the pid in their session tag (a reconnect line's own;
        the open model's counts, under None, have none)."""
        counts: Counter = Counter()
        for line in (self.out / "samples.jsonl").read_bytes().splitlines():
            session = orjson.loads(line)
            session = session.get("reconnect", session).get("session")
            counts[session and int(session.split("-")[0])] += 1
        return counts


def sent_counts(workers: dict[str, subprocess.CompletedProcess]) -> dict[str, int]:
    """What each worker says it sent to the master, by its worker id."""
    counts = {}
    for host, proc in workers.items():
        assert proc.returncode == 0, (host, proc.stdout, proc.stderr)
        (match,) = [m for line in proc.stdout.splitlines() if (m := SENT.match(line))]
        worker, sent, dropped = match.group(1), int(match.group(2)), int(match.group(3))
        assert dropped == 0
        counts[worker] = sent
    return counts


@pytest.fixture(scope="module")
def distributed(lan, tmp_path_factory):
    """One run of a master and two workers on three hosts: (master, workers, fleet)."""
    scenario = (f"target: http://{lan.addresses['server']}:{SERVER_PORT}/mcp\n{MIX}users: 4\nspawn_rate: 20\nduration: 3s\n"
                "thresholds: ['fail_ratio < 0.01', 'rps > 1', 'tools/call echo p99 < 5s']\n")
    with Fleet(lan, tmp_path_factory.mktemp("distributed"), scenario) as fleet:
        master, workers = fleet.finish()
    return master, workers, fleet


@pytest.mark.slow
def test_the_master_holds_every_workers_samples_and_judges_the_thresholds(distributed):
    master, workers, fleet = distributed
    assert master.returncode == 0, master.stdout + master.stderr
    sent = sent_counts(workers)
    summary = fleet.summary()
    per_worker = summary["samples_per_worker"]
    assert set(per_worker) == set(sent)  # the workers that joined, by the id each printed
    by_pid = fleet.lines_per_pid()
    for worker, count in sent.items():
        row = per_worker[worker]
        assert count > 0 and row["received"] == row["sent"] == count and row["finished"] is True
        assert by_pid[row["pid"]] == count  # the lines in samples.jsonl from that worker's process
    assert sum(by_pid.values()) == sum(sent.values()) == summary["total"]["count"]
    assert summary["samples_lost"] == {"dropped": 0, "in_transit": 0} and summary["workers_died"] == []
    assert summary["samples_per_process"] == [0, *(row["received"] for row in per_worker.values())]
    assert [t["ok"] for t in summary["thresholds"]] == [True, True, True]
    assert summary["thresholds"][1]["actual"] == pytest.approx(summary["total"]["rps"])
    assert "PASS  tools/call echo p99 < 5s" in master.stdout
    assert f"workers: 2, {summary['total']['count']} samples reached the master, 0 lost on the way" in master.stdout


@pytest.mark.slow
def test_local_workers_give_the_same_summary_as_workers_on_other_hosts(distributed, lan, tmp_path):
    _, _, fleet = distributed
    scenario, out = fleet.out.parent / "scenario.yaml", tmp_path / "out"
    # From the test's own address on the bridge: the same server, with two local workers.
    local = subprocess.run(mcpbench("load", scenario, "--workers", 2, "--out", out), cwd=REPO_ROOT, capture_output=True,
                           text=True, timeout=RUN_TIMEOUT)
    assert local.returncode == 0, local.stdout + local.stderr
    near, far = orjson.loads((out / "summary.json").read_bytes()), fleet.summary()
    assert near.keys() == far.keys()
    assert near["total"].keys() == far["total"].keys()
    assert {(r["type"], r["step"]): r.keys() for r in near["steps"]} == {(r["type"], r["step"]): r.keys() for r in far["steps"]}
    assert [t["threshold"] for t in near["thresholds"]] == [t["threshold"] for t in far["thresholds"]]
    assert len(near["samples_per_worker"]) == len(far["samples_per_worker"]) == 2
    assert next(iter(near["samples_per_worker"].values())).keys() == next(iter(far["samples_per_worker"].values())).keys()


@pytest.mark.slow
def test_a_reconnect_runs_figures_reach_the_master_whole(lan, tmp_path):
    scenario = (f"target: http://{lan.addresses['server']}:{FAULTS_PORT}/mcp\n{MIX}users: 4\nspawn_rate: 20\nduration: 3s\n"
                "reconnect: {policy: reinitialize, idempotent: [echo], budget: 100%}\nexit_code_on_error: 0\n")  # the drops fail steps: measured
    with Fleet(lan, tmp_path, scenario) as fleet:
        master, workers = fleet.finish()
    assert master.returncode == 0, master.stdout + master.stderr
    sent = sent_counts(workers)
    summary = fleet.summary()
    lines = [orjson.loads(line) for line in (fleet.out / "samples.jsonl").read_bytes().splitlines()]
    breaks = [line["reconnect"] for line in lines if "reconnect" in line]
    per_worker = summary["samples_per_worker"]
    assert breaks and sum(row["breaks"] for row in summary["reconnects"].values()) == len(breaks)
    assert sum(row["kinds"].get("reconnects", 0) for row in per_worker.values()) == len(breaks)  # each worker's own count
    assert sum(row["extra_requests"] for row in summary["reconnects"].values()) == sum(b["extra_requests"] for b in breaks)
    by_pid = fleet.lines_per_pid()
    for worker, count in sent.items():
        assert per_worker[worker]["received"] == by_pid[per_worker[worker]["pid"]] == count
    assert len(lines) == sum(sent.values())
    assert "reconnect reinitialize:" in master.stdout


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_named_with_the_samples_it_sent(lan, tmp_path):
    """In the open model: the survivor takes the whole rate once its peer is gone."""
    scenario = (f"target: http://{lan.addresses['server']}:{SERVER_PORT}/mcp\n{MIX}users: 8\nspawn_rate: 40\nduration: 8s\n"
                "open_model: {rate: 60}\n")
    with Fleet(lan, tmp_path, scenario) as fleet:
        doomed = fleet.workers.pop("w2")
        try:
            (joined,) = wait_for_lines(doomed, 1, timeout=RUN_TIMEOUT)
            victim = JOINED.match(joined).group(1)
            # Bounded wait until the master wrote a good share of samples (each worker sends every 0.5 s).
            deadline = time.monotonic() + RUN_TIMEOUT
            while sum(p.read_bytes().count(b"\n") for p in fleet.out.glob("samples.*.jsonl")) < 120:
                assert time.monotonic() < deadline and fleet.master.poll() is None, "no samples reached the master"
                time.sleep(0.1)
        finally:
            Lan.kill(doomed)  # the machine dies: its mcpbench and its Locust at once
        master, workers = fleet.finish()
    assert master.returncode == 0, master.stdout + master.stderr
    summary = fleet.summary()
    assert summary["workers_died"] == [victim]
    row = summary["samples_per_worker"][victim]
    assert row["finished"] is False and row["received"] > 0
    assert fleet.lines_per_pid()[row["pid"]] == row["received"]  # what it sent before it died, all of it written
    (survivor,) = sent_counts(workers)
    assert summary["samples_per_worker"][survivor]["finished"] is True
    assert summary["samples_per_worker"][survivor]["kinds"]["open"] == 1  # its open-model counts, at the end
    assert summary["open_model"]["rate"] == 60  # its share when it ended: all of it (30 while its peer lived)
    assert f"worker {victim} (" in master.stdout and f"died mid-run: {row['received']} samples reached the master before" in master.stdout


# --- bad input: one line, exit 3 (environment) or 2 (usage), nothing left running -----------------------


def run(*args, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(mcpbench("load", *args), cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def running(pattern: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.fixture
def scenario(tmp_path, http_server) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(f"target: {http_server.url}\n{MIX}users: 2\nduration: 2s\n")
    return path


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_a_master_no_worker_reaches_ends_with_one_line(tmp_path, scenario):
    port, out = free_port(), tmp_path / "out"
    proc = run(scenario, "--master", "--master-bind", f"127.0.0.1:{port}", "--join-timeout", "1s", "--out", out)
    assert proc.returncode == 3
    assert one_line(proc) == f"mcpbench: no worker reached the master on 127.0.0.1:{port} within 1 s"
    assert running(str(out)) == []


def test_a_master_port_in_use_is_one_line(tmp_path, scenario, http_server):
    port = int(http_server.url.split(":")[2].split("/")[0])
    proc = run(scenario, "--master", "--master-bind", f"127.0.0.1:{port}", "--out", tmp_path / "out")
    assert proc.returncode == 3
    assert one_line(proc) == f"mcpbench: cannot listen on 127.0.0.1:{port}: Address already in use"


@pytest.mark.slow  # > 3 s: the probe waits 3 s for a master's greeting
def test_a_worker_pointed_at_a_web_server_is_one_line(http_server):
    port = int(http_server.url.split(":")[2].split("/")[0])
    proc = run("--worker", "--master-host", "127.0.0.1", "--master-port", port)
    assert proc.returncode == 3
    assert one_line(proc) == f"mcpbench: 127.0.0.1:{port} is not a Locust master (it said nothing in 3 s; a master greets at once)"
    assert running(f"--master-port {port}") == []


def test_a_worker_with_no_master_gives_up_after_its_join_timeout():
    port = free_port()
    proc = run("--worker", "--master-host", "127.0.0.1", "--master-port", port, "--join-timeout", "1s")
    assert proc.returncode == 3
    assert one_line(proc) == f"mcpbench: no master at 127.0.0.1:{port} within 1 s: Connection refused"


@pytest.mark.slow
def test_a_worker_of_another_version_refuses_and_the_master_says_none_came(tmp_path, scenario):
    # The worker's machine has another mcpbench: its Python sees another version number.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import mcpbench\nmcpbench.__version__ = '0.0.0-elsewhere'\n")
    port, out = free_port(), tmp_path / "out"
    master = subprocess.Popen(mcpbench("load", scenario, "--master", "--master-bind", f"127.0.0.1:{port}", "--join-timeout", "6s", "--out", out),
                              cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port("127.0.0.1", port, proc=master)
        worker = run("--worker", "--master-host", "127.0.0.1", "--master-port", port, env=os.environ | {"PYTHONPATH": str(site)})
        _, stderr = master.communicate(timeout=RUN_TIMEOUT)
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
    assert worker.returncode == 3
    assert one_line(worker) == (
        f"mcpbench: this worker runs mcpbench 0.0.0-elsewhere, the master {__version__}: install the master's version on every machine"
    )
    assert master.returncode == 3 and stderr.strip() == f"mcpbench: no worker reached the master on 127.0.0.1:{port} within 6 s"
    assert running(str(out)) == [] and running(f"--master-port {port}") == []


@pytest.mark.parametrize(("args", "expected"), [
    (["{scenario}", "--worker", "--master-host", "h"], "--worker takes its run from the master: drop SCENARIO"),
    (["--worker"], "--worker needs --master-host"),
    (["{scenario}", "--master-host", "h"], "--master-host goes with --worker"),
    (["{scenario}", "--expect-workers", "2"], "--expect-workers goes with --master"),
    (["{scenario}", "--master", "--master-bind", "h:70000"], "--master-bind 'h:70000': the port must be a number from 1 to 65535"),
    (["{scenario}", "--master", "--join-timeout", "soon"], "--join-timeout 'soon' is not a duration (like 10s, 500ms, 2m)"),
])
def test_usage_errors_are_one_line_and_exit_2(tmp_path, args, expected):
    path = tmp_path / "s.yaml"
    path.write_text("target: http://127.0.0.1:9/mcp\n")
    proc = run(*[a.format(scenario=path) for a in args])
    assert proc.returncode == 2
    assert one_line(proc) == f"mcpbench: {expected}"


def test_the_documented_commands_and_manifests_use_options_that_exist():
    """docs/load.md's commands for several machines and its Kubernetes manifests, against `load --help`."""
    text = (REPO_ROOT / "docs" / "load.md").read_text()
    section = text[text.index("## Several machines"):text.index("## Your own locustfile")]
    known = set(re.findall(r"--[a-z][a-z-]+", run("--help").stdout))
    commands = [line.split() for line in re.findall(r"^mcpbench load .*$", section, flags=re.M)]
    (manifests,) = re.findall(r"```yaml\n(.*?)```", section, flags=re.S)
    documents = list(yaml.safe_load_all(manifests))
    jobs = [d for d in documents if d["kind"] == "Job"]
    assert {d["kind"] for d in documents} == {"Service", "Job"} and len(jobs) == 2
    commands += [job["spec"]["template"]["spec"]["containers"][0]["args"] for job in jobs]
    used = {word for command in commands for word in command if word.startswith("--")}
    assert len(commands) >= 4 and {"--master", "--worker", "--master-host", "--expect-workers", "--master-bind"} <= used
    assert used <= known, used - known
