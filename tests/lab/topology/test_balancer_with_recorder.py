"""The builtin balancer stacked with the recorder in one mitmdump (the sticky probe's verdicts moved to tests/probe/)."""

import pytest

from mcpbench.lab.topology.cluster import running_instances

pytestmark = pytest.mark.slow  # seconds each: `./dev test -m "not slow"` leaves them out


def test_balancer_stacks_with_the_recorder(tmp_path):
    """One mitmdump with the recorder first and the balancer second: sticky legacy sessions hold
    on 3 instances and every session is recorded."""
    import gevent
    import orjson

    from mcpbench.lab.peers.servers import HOST, start_listening
    from mcpbench.lab.topology.cluster import mitmdump_path
    from mcpbench.load.client import McpClient
    from mcpbench.transport.green import GreenLegacySse, http_client
    from mcpbench.system.processes import free_port, stop_process
    from mcpbench.proxies.balancer import __file__ as balancer_script
    from mcpbench.record import ADDON_PATH

    class Steps:
        def __init__(self):
            self.seen = []

        def fire(self, **kw):
            self.seen.append(kw)

    trace = tmp_path / "t.jsonl"
    with running_instances(3, "sse") as servers:
        port = free_port()
        instances = ",".join(f"{HOST}:{s.port}" for s in servers)
        with open(tmp_path / "mitmdump.log", "wb") as log:
            proxy = start_listening(
                [mitmdump_path(), "-q", "--mode", f"reverse:http://{HOST}:{servers[0].port}", "--listen-host", HOST, "-p", str(port),
                 "--set", "connection_strategy=lazy", "-s", str(ADDON_PATH), "--set", f"mcpbench_out={trace}",
                 "-s", balancer_script, "--set", f"mcpbench_balancer_instances={instances}",
                 "--set", "mcpbench_balancer_policy=sticky"],
                port, stdout=log, stderr=log,
            )
        try:
            url = f"http://{HOST}:{port}/sse"
            steps = Steps()
            client = McpClient(lambda: GreenLegacySse(url, http_client(url, timeout=10, concurrency=2), timeout=10), steps,
                               request_type="sse", timeout=10)

            def sessions():
                for _ in range(6):
                    with client.session() as ok:
                        if ok:
                            client.call_tool("echo", {"text": "hi"})

            gevent.spawn(sessions).join(120)
        finally:
            stop_process(proxy)
    assert len(steps.seen) == 6 * 4 and not [s for s in steps.seen if s["exception"]], steps.seen
    landed = {s["context"]["session"]: set() for s in steps.seen}
    for s in steps.seen:
        landed[s["context"]["session"]].add(s["context"]["instance"])
    assert all(len(where) == 1 for where in landed.values()) and len(set().union(*landed.values())) == 3
    messages = [orjson.loads(line) for line in trace.read_bytes().splitlines()]
    assert sum(1 for m in messages if (m.get("msg") or {}).get("method") == "initialize") == 6
