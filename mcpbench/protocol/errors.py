"""The one error tree of mcpbench, and the exit status each branch ends a command with.

::

    McpbenchError                 anything mcpbench reports as an expected failure   exit 2
    ├── ProtocolError             a message or stream breaks the MCP / JSON-RPC rules
    │   ├── LocalProtocolError    we were asked to send something invalid
    │   └── RemoteProtocolError   the peer sent something invalid
    ├── TraceError                a trace file cannot be read or written
    │   └── TraceWriteError       the trace stopped being written (disk full, file removed)  exit 3
    ├── ReplayError               a replay cannot go on
    ├── CredentialError           a header, variable, file, proxy URL or secret that cannot be used
    ├── OutputError               an output path cannot be created or written, or names an input
    ├── ConfigError               an MCP host's config file `wrap` cannot read or change safely
    └── EnvironmentProblem        the machine or network, not the input             exit 3
        ├── TargetError           a server or command cannot be reached or started, or is not MCP
        │   └── BadTargetError    …because it is written wrongly: unusable input      exit 2
        ├── BindError             a port is busy or a bind address unknown
        └── DiscoveryError        an authorization server or metadata document that cannot be used
                                  (protocol/auth.py: not found, not JSON, not OAuth)

The command line turns any `McpbenchError` into a one-line message and its
`exit_code`; anything else is a bug and keeps its traceback. The exit statuses
are the same for every command (README.md, "Exit status").
"""

# Exit statuses shared by every command.
EXIT_OK = 0
EXIT_FAILED = 1  # the measured thing failed: changed calls, a failed threshold, violations under --strict
EXIT_INPUT = 2  # unusable input or usage
EXIT_ENVIRONMENT = 3  # port busy, target unreachable, not MCP
# Shells report death by signal N as 128 + N: a command ended by a signal exits the same way.
EXIT_SIGNAL_BASE = 128


class McpbenchError(Exception):
    """Base of every expected failure; `str(err)` is the one line shown to the user."""

    exit_code = EXIT_INPUT


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

    exit_code = EXIT_ENVIRONMENT  # the disk or file system, not the input

    def __init__(self, message: str, *, reported: bool = False) -> None:
        super().__init__(message)
        self.reported = reported


class EnvironmentProblem(McpbenchError):
    """The environment, not the input, stopped the command (exit status 3)."""

    exit_code = EXIT_ENVIRONMENT


class TargetError(EnvironmentProblem):
    """A target (URL or command) cannot be reached, started or kept alive, or does not speak MCP."""


class BadTargetError(TargetError):
    """A target, URL or address that is written wrongly: unusable input, not the environment."""

    exit_code = EXIT_INPUT


class BindError(EnvironmentProblem):
    """A listening address cannot be used: the port is busy, or the host unknown or not local."""


class ReplayError(McpbenchError):
    """A replay cannot go on."""


class CredentialError(McpbenchError):
    """Credentials or client options that cannot be used: a header without a colon, a variable not set,
    a file that cannot be read, a proxy URL written wrongly, a secret the authorization server refused.
    The message names the header, variable, file or URL, never a secret."""


class OutputError(McpbenchError):
    """An output path (a file or folder an option names) cannot be created or written, or names an
    input (or another output): writing it would destroy user data."""


class ConfigError(McpbenchError):
    """An MCP host's config file that `mcpbench wrap`/`unwrap` cannot read or change safely: not JSON,
    a server entry of an unknown shape, an entry wrapped by another mcpbench version, a read-only
    file. The message names the file (and line); nothing is written."""
