"""Host configs laid out as each host keeps them, in a temporary home and project folder."""

import shutil
from pathlib import Path

CONFIGS = Path(__file__).parent / "configs"

# (fixture, folder: "home" or "project", where the host keeps it): copies of real layouts.
LAYOUT = (
    ("claude-desktop-macos.json", "home", "Library/Application Support/Claude/claude_desktop_config.json"),
    ("claude-desktop-windows.json", "home", "AppData/Roaming/Claude/claude_desktop_config.json"),
    ("claude-code-user.json", "home", ".claude.json"),
    ("claude-code-project.json", "project", ".mcp.json"),
    ("cursor-user.json", "home", ".cursor/mcp.json"),
    ("cursor-project.json", "project", ".cursor/mcp.json"),
    ("vscode-project.jsonc", "project", ".vscode/mcp.json"),
    ("windsurf.json", "home", ".codeium/windsurf/mcp_config.json"),
)

# The stdio servers of those files (each wrapped by --all) and the HTTP ones (never rewritten).
STDIO_SERVERS = {"filesystem", "weather", "sqlite", "local-notes", "github", "db", "browser", "project-tools", "bare",
                 "Perplexity", "fetch", "time", "local-exe"}
HTTP_SERVERS = {"sentry", "events", "linear", "remote"}


def lay_out(root: Path) -> tuple[Path, Path, dict[Path, bytes]]:
    """A home and a project folder under `root` holding every fixture; returns them and each file's bytes."""
    home, project = root / "home", root / "project"
    files = {}
    for fixture, folder, relative in LAYOUT:
        path = (home if folder == "home" else project) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CONFIGS / fixture, path)
        files[path] = path.read_bytes()
    return home, project, files


def contents(files: dict[Path, bytes]) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in files}


def strip_jsonc(text: str) -> str:
    """VS Code's JSONC as JSON, for checking a result with the standard parser: comments and trailing
    commas out (the fixtures have no `//` inside strings but URLs, which this keeps)."""
    import re

    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'(?m)^(\s*(?:[^"\n]|"(?:[^"\\\n]|\\.)*")*?)//.*$', r"\1", text)
    return re.sub(r",(\s*[}\]])", r"\1", text)
