"""The one transport interface (`base.py`), its blocking shell (`threads.py`), its gevent shell
(`green.py`, imported only where gevent runs), its one-exchange-at-a-time shell for the probe
(`exchange.py`) and `MockTransport` (`mock.py`)."""

from mcpbench.transport.base import Arrival, Item, Lost, Opened, Sink, Transport, shut_socket
from mcpbench.transport.mock import CUT, MockTransport

__all__ = ["CUT", "Arrival", "Item", "Lost", "MockTransport", "Opened", "Sink", "Transport", "shut_socket"]
