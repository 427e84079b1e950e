"""Where MCP hosts keep their server configs, and the server entries each file holds.

One table, `LOCATIONS`: each host's files, user-wide (under the home folder, one path per OS
where the host puts it in a different place) and per project (under the project folder), the key
that holds the servers and whether the format allows comments. Claude Code's user file also keeps
servers per project, under `projects.<path>.mcpServers` (its "local" scope): `servers_of` finds those.

Sources, each host's own documentation of its file:
- Claude Desktop: `claude_desktop_config.json`, `mcpServers`; macOS `~/Library/Application
  Support/Claude/`, Windows `%APPDATA%\\Claude\\`, Linux `~/.config/Claude/`.
- Claude Code: project `.mcp.json` and user `~/.claude.json`, `mcpServers` (`type` stdio/http/sse).
- Cursor: project `.cursor/mcp.json` and user `~/.cursor/mcp.json`, `mcpServers`.
- VS Code: project `.vscode/mcp.json` and the user profile's `mcp.json`, key `servers` (beside
  `inputs`), JSONC.
- Windsurf: `~/.codeium/windsurf/mcp_config.json`, `mcpServers` (a remote server's URL in `serverUrl`).
"""

import os
from dataclasses import dataclass
from pathlib import Path

from mcpbench.wrap.jsonc import Node, parse


@dataclass(frozen=True, slots=True)
class Location:
    host: str
    scope: str  # "user" (under the home folder) or "project"
    path: str  # relative to the home or project folder
    key: str  # the object that holds the servers
    comments: bool = False  # JSONC


LOCATIONS = (
    Location("claude-desktop", "user", "Library/Application Support/Claude/claude_desktop_config.json", "mcpServers"),
    Location("claude-desktop", "user", ".config/Claude/claude_desktop_config.json", "mcpServers"),
    Location("claude-desktop", "user", "AppData/Roaming/Claude/claude_desktop_config.json", "mcpServers"),
    Location("claude-code", "user", ".claude.json", "mcpServers"),
    Location("claude-code", "project", ".mcp.json", "mcpServers"),
    Location("cursor", "user", ".cursor/mcp.json", "mcpServers"),
    Location("cursor", "project", ".cursor/mcp.json", "mcpServers"),
    Location("vscode", "user", ".config/Code/User/mcp.json", "servers", comments=True),
    Location("vscode", "user", "Library/Application Support/Code/User/mcp.json", "servers", comments=True),
    Location("vscode", "user", "AppData/Roaming/Code/User/mcp.json", "servers", comments=True),
    Location("vscode", "project", ".vscode/mcp.json", "servers", comments=True),
    Location("windsurf", "user", ".codeium/windsurf/mcp_config.json", "mcpServers"),
)
HOSTS = tuple(dict.fromkeys(location.host for location in LOCATIONS))


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """A host config found on disk."""

    location: Location
    path: Path

    @property
    def label(self) -> str:
        return f"{self.location.host} ({self.location.scope})"


@dataclass(slots=True)
class Server:
    """One server entry of a config: its name, where it sits (`within`: a Claude Code project's
    path, or None at the top) and its node in the parsed file."""

    name: str
    node: Node
    within: str | None = None

    @property
    def label(self) -> str:
        return self.name if self.within is None else f"{self.name} (project {self.within})"


def find_configs(home: Path, project: Path) -> list[ConfigFile]:
    """The host configs that exist under `home` and `project`, in `LOCATIONS` order, each file once
    (a project folder that is the home folder holds one `.cursor/mcp.json`)."""
    found: list[ConfigFile] = []
    seen: set[Path] = set()
    for location in LOCATIONS:
        path = (home if location.scope == "user" else project) / location.path
        if path.is_file():
            real = Path(os.path.realpath(path))
            if real not in seen:
                seen.add(real)
                found.append(ConfigFile(location, path))
    return found


def read_config(config: ConfigFile) -> tuple[str, Node]:
    """The text of `config` and its tree (raises `ConfigError` when it is not JSON)."""
    raw = config.path.read_bytes()
    name = str(config.path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        from mcpbench.protocol.errors import ConfigError

        raise ConfigError(f"{name}: byte {exc.start}: not UTF-8: cannot read it, nothing written") from None
    # A byte order mark (some editors write one) is no JSON: read as a space, so spans index `text`.
    root = parse(" " + text[1:] if text.startswith("\ufeff") else text, name, comments=config.location.comments)
    return text, root


def servers_of(config: ConfigFile, root: Node) -> list[Server]:
    """The server entries of a parsed config (a key of the wrong type holds none)."""
    servers: list[Server] = []
    key = config.location.key
    if not isinstance(root.value, dict):
        return servers
    _collect(root, key, None, servers)
    if config.location.host == "claude-code" and config.location.scope == "user":
        projects = root.members.get("projects")
        if projects is not None and isinstance(projects[1].value, dict):
            for path, (_, project) in projects[1].members.items():
                if isinstance(project.value, dict):
                    _collect(project, key, path, servers)
    return servers


def _collect(parent: Node, key: str, within: str | None, servers: list[Server]) -> None:
    member = parent.members.get(key)
    if member is not None and isinstance(member[1].value, dict):
        for name, (_, node) in member[1].members.items():
            servers.append(Server(name, node, within))
