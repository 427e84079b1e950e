"""Proxies between MCP clients and servers: the in-process mitmproxy host (`host.py`) and the lab's
addons run in it, the balancer and the fault injector, with the stdio fault wrapper beside them."""
