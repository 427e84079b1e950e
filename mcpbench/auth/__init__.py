"""How mcpbench's clients reach a user's deployment: their headers, bearer tokens, OAuth client
credentials and HTTP proxies, written once for every client path.

The sans-IO part (challenges, discovery documents, token answers, when to renew) is the protocol
core's (`protocol/auth.py`); here are the settings (`options.py`), the headers' expansion
(`headers.py`), the proxy routes (`proxy.py`), and the blocking HTTP shell (`fetch.py`) that
`oauth.py`'s token sources and the replayer's connections use.
"""

from mcpbench.auth.oauth import OAuthConfig, TokenSource
from mcpbench.auth.options import ClientAccess, ClientOptions, client_options
from mcpbench.auth.proxy import Proxy, ProxySettings

__all__ = ["ClientAccess", "ClientOptions", "OAuthConfig", "Proxy", "ProxySettings", "TokenSource", "client_options"]
