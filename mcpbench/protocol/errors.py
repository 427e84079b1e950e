"""The one error tree of mcpbench.

::

    McpbenchError                 anything mcpbench reports as an expected failure
    ├── ProtocolError             a message or stream breaks the MCP / JSON-RPC rules
    │   ├── LocalProtocolError    we were asked to send something invalid
    │   └── RemoteProtocolError   the peer sent something invalid
    ├── TraceError                a trace file cannot be read or written
    │   └── TraceWriteError       the trace stopped being written (disk full, file removed); exit 3
    ├── TargetError               a server or command cannot be reached or started
    ├── OutputError               an output would overwrite an input (or another output)
    └── ReplayError               a replay cannot go on

The command line turns any `McpbenchError` into a one-line message and a non-zero
exit; anything else is a bug and keeps its traceback.
"""


class McpbenchError(Exception):
    """Base of every expected failure; `str(err)` is the one line shown to the user."""


class ProtocolError(McpbenchError):
    """A message or stream breaks the rules. Abstract: raise a subclass."""


class LocalProtocolError(ProtocolError):
    """The caller asked the core to produce something invalid."""


class RemoteProtocolError(ProtocolError):
    """The peer produced something invalid."""


class TraceError(McpbenchError):
    """A trace cannot be read or written; the message names the file and line."""


class TraceWriteError(TraceError):
    """Recording stopped: the trace could not be written any more. The session went on.

    `reported` is set when the reason was already shown, as it happened: the command then only
    ends with `exit_code`.
    """

    exit_code = 3  # the environment (disk, file system), not the input

    def __init__(self, message: str, *, reported: bool = False) -> None:
        super().__init__(message)
        self.reported = reported


class TargetError(McpbenchError):
    """A target (URL or command) cannot be reached, started or kept alive."""


class OutputError(McpbenchError):
    """An output path names an input (or another output): writing it would destroy user data."""


class ReplayError(McpbenchError):
    """A replay cannot go on."""
