"""The HAProxy configurations (lab/topology/haproxy.py), without processes."""

from mcpbench.lab.topology.haproxy import config
from mcpbench.protocol.http import INSTANCE


def test_haproxy_configs_carry_what_mcp_needs(tmp_path):
    servers = [("s1", "127.0.0.1", 8001), ("s2", "127.0.0.1", 8002)]
    for policy, balance in (("random", "random"), ("round-robin", "roundrobin"), ("source", "source")):
        text = config(policy, "streamable-http", servers, port=9000, folder=tmp_path)
        assert f"balance {balance}" in text and "option http-no-delay" in text and "timeout server 60s" in text
        assert "bind 127.0.0.1:9000" in text and f"http-response set-header {INSTANCE} %[srv_name]" in text
    sticky = config("sticky", "streamable-http", servers, port=9000, folder=tmp_path)
    assert "stick match req.hdr(mcp-session-id)" in sticky and "stick store-response res.hdr(mcp-session-id)" in sticky
    assert "wait-for-body" not in sticky and "http-response wait-for-body time 45s" in config(
        "round-robin", "streamable-http", servers, port=9000, folder=tmp_path, buffer=True)  # buffering on
    hashed = config("session-hash", "streamable-http", servers, port=9000, folder=tmp_path)
    assert "balance hdr(mcp-session-id)" in hashed and "stick" not in hashed
    legacy = config("sticky", "sse", servers, port=9000, folder=tmp_path)
    assert "set-map(" in legacy and "use-server s2 if { url_param(session_id)" in legacy
