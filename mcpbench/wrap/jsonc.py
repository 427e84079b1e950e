"""Host config files read with the place of every value, so `wrap` can edit them surgically.

The standard `json` module gives values without positions, and re-dumping a config would lose the
user's indentation, key order, comments and trailing commas. This reader keeps, for each value,
its span in the text (`Node.start`, `Node.end`), and for each object member the span of its key:
an edit replaces exactly the bytes of one value and leaves every other byte as it was.

Two dialects: strict JSON (RFC 8259; Claude Desktop, Claude Code, Cursor, Windsurf) and JSONC
(VS Code's `mcp.json`: `//` and `/* */` comments and trailing commas, as VS Code's own
jsonc-parser accepts them). Strings are decoded with `json.loads` on their exact text, so
escapes follow the standard exactly.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from mcpbench.protocol.errors import ConfigError

# Config files are small; a deeper nesting is no host config (and would exhaust the recursion).
MAX_DEPTH = 64


@dataclass(slots=True)
class Node:
    """One JSON value: `value` (plain Python, as json.loads gives it) and its span in the text.

    Objects also have `members`: key -> (the key's start, the member's value node), in file order.
    """

    value: Any
    start: int
    end: int
    members: dict[str, tuple[int, "Node"]] = field(default_factory=dict)
    items: list["Node"] = field(default_factory=list)


def line_col(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line} column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


class _Reader:
    def __init__(self, text: str, name: str, comments: bool) -> None:
        self.text, self.name, self.comments, self.pos = text, name, comments, 0

    def fail(self, why: str, pos: int | None = None) -> ConfigError:
        at = self.pos if pos is None else pos
        return ConfigError(f"{self.name}: {line_col(self.text, at)}: {why}: cannot read it, nothing written")

    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c in " \t\r\n":
                self.pos += 1
            elif c == "/" and text.startswith("//", self.pos):
                if not self.comments:
                    raise self.fail("a comment (JSON has none)")
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end + 1
            elif c == "/" and text.startswith("/*", self.pos):
                if not self.comments:
                    raise self.fail("a comment (JSON has none)")
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("a comment that never ends")
                self.pos = end + 2
            else:
                return

    def value(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise self.fail("nested too deep")
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("the file ends where a value should be")
        c = self.text[self.pos]
        if c == "{":
            return self.container(depth, "}")
        if c == "[":
            return self.container(depth, "]")
        if c == '"':
            return self.string()
        return self.scalar()

    def string(self) -> Node:
        start, text, i = self.pos, self.text, self.pos + 1
        while True:
            j = text.find('"', i)
            if j < 0:
                raise self.fail("a string that never ends", start)
            backslashes = 0
            while text[j - 1 - backslashes] == "\\":
                backslashes += 1
            if backslashes % 2 == 0:
                break
            i = j + 1
        try:
            value = json.loads(text[start:j + 1])
        except ValueError as exc:
            raise self.fail(f"a bad string ({exc.msg})", start) from None
        self.pos = j + 1
        return Node(value, start, self.pos)

    def scalar(self) -> Node:
        start, text, n = self.pos, self.text, len(self.text)
        end = start
        while end < n and text[end] not in ",]} \t\r\n/":
            end += 1
        token = text[start:end]
        try:
            value = json.loads(token) if token else None
        except ValueError:
            value = ...
        if not token or value is ... or isinstance(value, (dict, list, str)):
            raise self.fail(f"not JSON: {token[:20] or text[start:start + 1]!r}", start)
        self.pos = end
        return Node(value, start, end)

    def container(self, depth: int, close: str) -> Node:
        start = self.pos
        self.pos += 1
        node = Node({} if close == "}" else [], start, start)
        first = True
        while True:
            self.skip()
            if self.pos < len(self.text) and self.text[self.pos] == close and (first or self.comments):
                self.pos += 1
                break  # empty, or (JSONC) after a trailing comma
            if close == "}":
                if self.pos >= len(self.text) or self.text[self.pos] != '"':
                    raise self.fail("an object key (a string) expected")
                key_start = self.pos
                key = self.string().value
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("':' expected after a key")
                self.pos += 1
                member = self.value(depth + 1)
                node.value[key] = member.value
                node.members[key] = (key_start, member)
            else:
                item = self.value(depth + 1)
                node.value.append(item.value)
                node.items.append(item)
            first = False
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith(close, self.pos):
                self.pos += 1
                break
            raise self.fail(f"',' or '{close}' expected")
        node.end = self.pos
        return node


def parse(text: str, name: str, *, comments: bool = False) -> Node:
    """The tree of `text` (the file `name`, for messages); JSONC when `comments`.

    Raises:
        ConfigError: the text is not JSON (JSONC), naming the file, line and column.
    """
    reader = _Reader(text, name, comments)
    root = reader.value(0)
    reader.skip()
    if reader.pos != len(text):
        raise reader.fail("more after the JSON value")
    return root
