"""Normalise answers and diff them: the differences are data (`Difference`), rendered elsewhere.

What is compared of a call is `{"result": …}` or `{"error": …}`, plus
`"notifications"` (the server notifications that belonged to the call) when
either side has some. Before comparing, both sides are normalised:

- default rules (`DEFAULT_RULES`): UUIDs, 32-hex ids and ISO-8601 timestamps
  inside strings become placeholders; values under session-id and timestamp
  keys too; progress tokens and 2026-07-28 `requestState` (opaque, chosen per
  run) are dropped;
- JSON inside a `content[].text` string is parsed, so a reordered or changed
  field shows as a path into it rather than as a whole different string;
- user rules (`--ignore`) drop the values at matching paths;
- era rules (`ERA_RULES`), only when the replay speaks another era than the
  recording: the 2026-07-28 result fields that carry protocol, not content;
- a refused version probe (`PROBES`: an error answering `server/discover`) is one
  outcome whatever its code and message: the client falls back to a handshake
  either way, and servers refuse it differently (-32601 method not found from
  one that lacks the method, -32602 from one that does not speak the version).

A rule is `[METHOD[@NAME]:]PATH`. PATH is dot-separated keys with `[N]` list
indexes; `*` (or `[*]`) matches any one key or index, `**` any depth, and
`["a.b"]` quotes a key holding dots. `tools/call@echo:result.content[*].text`
applies to the `echo` tool's calls only.
"""

import difflib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcpbench.files.outputs import write_atomic
from mcpbench.protocol.errors import ReplayError
from mcpbench.protocol.versions import DISCOVER

UUID_RE = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b|\b[0-9a-f]{32}\b")
TIMESTAMP_RE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
)
UUID = "<uuid>"
TIMESTAMP = "<timestamp>"
SESSION_ID = "<session-id>"

# Keys whose values are per-run by nature, matched at any depth.
SESSION_KEYS = frozenset({"sessionId", "session_id", "mcp-session-id", "Mcp-Session-Id"})
TIMESTAMP_KEYS = frozenset({"timestamp", "createdAt", "updatedAt", "created_at", "updated_at", "ts", "time", "date", "expiresAt"})

DEFAULT_RULES = (
    "notifications[*].params.progressToken",  # a client-chosen id
    "result.requestState",  # opaque, sealed per server process
)

# 2026-07-28 results carry these; handshake-era ones do not. Dropped only when
# the replay and the recording speak different eras.
ERA_RULES = (
    "result.resultType",
    "result.cacheScope",
    "result.ttlMs",
    'result._meta["io.modelcontextprotocol/serverInfo"]',
)

# Methods a client sends to learn what a server speaks, falling back when refused: a refusal's
# code and message say only how the server said no.
PROBES = frozenset({DISCOVER})
REFUSED = "<refused>"

# A text starting like this may hold JSON worth comparing field by field.
_JSON_START = (b"{", b"[")


@dataclass(frozen=True, slots=True)
class Difference:
    """One difference: at `path`, `old` (recorded) became `new` (live).

    `kind` is "changed", "added" (only in new) or "removed" (only in old).
    """

    path: str
    kind: str
    old: Any = None
    new: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "old": self.old, "new": self.new}


_TOKEN_RE = re.compile(r'\[(\*|\d+|"(?:[^"\\]|\\.)*")\]|\.?(\*\*|\*|[^.\[\]]+)')


def parse_path(text: str) -> tuple:
    """`result.content[*].text` -> ("result", "content", "*", "text"); indexes become ints."""
    text = text.strip()
    if text.startswith("$"):
        text = text[1:]
    tokens: list = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if not match or match.end() == pos:
            raise ReplayError(f"bad ignore path {text!r} at character {pos + 1}")
        bracket, bare = match.groups()
        if bracket is not None:
            if bracket == "*":
                tokens.append("*")
            elif bracket.startswith('"'):
                tokens.append(orjson.loads(bracket))
            else:
                tokens.append(int(bracket))
        else:
            tokens.append(bare)
        pos = match.end()
    if not tokens:
        raise ReplayError(f"empty ignore path {text!r}")
    return tuple(tokens)


def format_path(tokens: Iterable) -> str:
    out = []
    for token in tokens:
        if isinstance(token, int):
            out.append(f"[{token}]")
        elif token == "*" and out:
            out.append("[*]")
        elif re.fullmatch(r"[A-Za-z_$][\w$/-]*|\*\*?", str(token)):
            out.append(("." if out else "") + str(token))
        else:
            out.append(f"[{orjson.dumps(token).decode()}]")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class IgnoreRule:
    """One ignore rule, optionally scoped to a method and a tool/prompt/resource name."""

    path: tuple
    method: str | None = None
    name: str | None = None

    @classmethod
    def parse(cls, text: str) -> "IgnoreRule":
        method = name = None
        head, sep, rest = text.partition(":")
        # A scope has a slash or an @ in it ("tools/call@echo:"); a bare path never has a colon.
        if sep and ("/" in head or "@" in head) and not head.startswith(("$", "[")):
            method, _, name = head.partition("@")
            text = rest
        return cls(parse_path(text), method or None, name or None)

    def applies(self, method: str | None, name: str | None) -> bool:
        return (self.method is None or self.method == method) and (self.name is None or self.name == name)

    def __str__(self) -> str:
        scope = f"{self.method}{'@' + self.name if self.name else ''}:" if self.method else ""
        return scope + format_path(self.path)


class IgnoreRules:
    """The ignore rules in force for one comparison."""

    def __init__(self, rules: Iterable[str | IgnoreRule] = (), *, defaults: bool = True, era: bool = False) -> None:
        texts: list[str | IgnoreRule] = list(DEFAULT_RULES) if defaults else []
        if era:
            texts += ERA_RULES
        texts += list(rules)
        self.rules = [rule if isinstance(rule, IgnoreRule) else IgnoreRule.parse(rule) for rule in texts]
        self.defaults = defaults

    def extend(self, rules: Iterable[str | IgnoreRule]) -> "IgnoreRules":
        out = IgnoreRules(defaults=False)
        out.defaults = self.defaults
        out.rules = self.rules + [rule if isinstance(rule, IgnoreRule) else IgnoreRule.parse(rule) for rule in rules]
        return out

    def for_call(self, method: str | None, name: str | None) -> list[tuple]:
        return [rule.path for rule in self.rules if rule.applies(method, name)]


def load_rules(path: str | os.PathLike) -> list[str]:
    """Rules from a file: a JSON list, `{"ignore": [...]}`, or one rule a line (# comments).

    Raises:
        ReplayError: the file cannot be read or parsed.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read ignore rules: {exc.strerror}") from None
    stripped = data.strip()
    if stripped[:1] in (b"[", b"{"):
        try:
            obj = orjson.loads(stripped)
        except orjson.JSONDecodeError as exc:
            raise ReplayError(f"{path}: not JSON: {exc}") from None
        rules = obj.get("ignore", []) if isinstance(obj, dict) else obj
        if not isinstance(rules, list) or not all(isinstance(rule, str) for rule in rules):
            raise ReplayError(f"{path}: expected a list of rule strings (or {{\"ignore\": [...]}})")
        return rules
    lines = data.decode("utf-8", "replace").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def save_rules(path: str | os.PathLike, rules: Iterable[str], *, source: str | None = None) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    body = {"ignore": sorted(set(rules)), "learned_from": source}
    write_atomic(out, orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
    return out


# ---- normalisation ----------------------------------------------------------------------------


def _match_step(states: list[tuple], token: Any) -> tuple[list[tuple], bool]:
    """Advance rule suffixes by one path token; True when one of them ends here."""
    nxt: list[tuple] = []
    done = False
    for rest in states:
        head = rest[0]
        if head == "**":
            # ** matches zero tokens (try the rest here) or this one (stay).
            nxt.append(rest)
            if len(rest) > 1:
                sub, hit = _match_step([rest[1:]], token)
                nxt.extend(sub)
                done |= hit
            continue
        if head == "*" or head == token:
            if len(rest) == 1:
                done = True
            else:
                nxt.append(rest[1:])
    return nxt, done


def _scrub_string(text: str) -> str:
    if len(text) >= 16 and ("-" in text or ":" in text or len(text) >= 32):
        text = UUID_RE.sub(UUID, text)
        text = TIMESTAMP_RE.sub(TIMESTAMP, text)
    return text


def normalise(obj: Any, paths: list[tuple] = (), *, defaults: bool = True, parse_json_text: bool = True) -> Any:
    """A copy of `obj` with noise replaced or dropped (see the module docstring)."""
    return _norm(obj, list(paths), defaults, parse_json_text, None)


def _norm(obj: Any, states: list[tuple], defaults: bool, parse_text: bool, parent_key: Any) -> Any:
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if key == "<json>":  # parsed text: transparent to rule paths
                out[key] = _norm(value, states, defaults, parse_text, None)
                continue
            sub, hit = _match_step(states, key) if states else ((), False)
            if hit:
                continue
            if defaults and key in SESSION_KEYS and isinstance(value, str):
                out[key] = SESSION_ID
                continue
            if defaults and key in TIMESTAMP_KEYS and isinstance(value, (str, int, float)) and not isinstance(value, bool):
                out[key] = TIMESTAMP
                continue
            if parse_text and key == "text" and parent_key == "content-item" and isinstance(value, str):
                value = _maybe_json(value)
            value = _norm(value, sub, defaults, parse_text, key)
            if key == "_meta" and value == {}:
                continue  # an empty _meta says nothing: the same as none
            out[key] = value
        return out
    if isinstance(obj, list):
        out_list = []
        item_key = "content-item" if parent_key == "content" else None
        for index, value in enumerate(obj):
            sub, hit = _match_step(states, index) if states else ((), False)
            if hit:
                out_list.append("<ignored>")
                continue
            out_list.append(_norm(value, sub, defaults, parse_text, item_key))
        return out_list
    if isinstance(obj, str) and defaults:
        return _scrub_string(obj)
    return obj


def _maybe_json(text: str) -> Any:
    head = text.lstrip()[:1].encode()
    if head not in _JSON_START:
        return text
    try:
        return {"<json>": orjson.loads(text)}
    except orjson.JSONDecodeError:
        return text


# ---- diff ---------------------------------------------------------------------------------------


def _key(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return repr(value).encode()


def diff(old: Any, new: Any, path: tuple = ()) -> list[Difference]:
    """Every difference between two normalised values, as `Difference`s with readable paths."""
    out: list[Difference] = []
    _diff(old, new, path, out)
    return out


def _diff(old: Any, new: Any, path: tuple, out: list[Difference]) -> None:
    if old == new and type(old) is type(new):
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key in new:
                _diff(old[key], new[key], path + (key,), out)
            else:
                out.append(Difference(format_path(_clean(path + (key,))), "removed", old[key], None))
        for key in new:
            if key not in old:
                out.append(Difference(format_path(_clean(path + (key,))), "added", None, new[key]))
        return
    if isinstance(old, list) and isinstance(new, list):
        _diff_list(old, new, path, out)
        return
    out.append(Difference(format_path(_clean(path)), "changed", old, new))


def _clean(path: tuple) -> tuple:
    """Drop the `<json>` marker of parsed text from a displayed path."""
    return tuple(token for token in path if token != "<json>")


def _diff_list(old: list, new: list, path: tuple, out: list[Difference]) -> None:
    if len(old) == len(new):
        # Same length: element-wise (a changed field shows as a path into the item).
        for index, (a, b) in enumerate(zip(old, new)):
            _diff(a, b, path + (index,), out)
        return
    matcher = difflib.SequenceMatcher(None, [_key(v) for v in old], [_key(v) for v in new], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for k in range(paired):
            _diff(old[i1 + k], new[j1 + k], path + (i1 + k,), out)
        for k in range(i1 + paired, i2):
            out.append(Difference(format_path(_clean(path + (k,))), "removed", old[k], None))
        for k in range(j1 + paired, j2):
            out.append(Difference(format_path(_clean(path + (k,))), "added", None, new[k]))


def compare(
    old: Any, new: Any, rules: "IgnoreRules", *, method: str | None = None, name: str | None = None
) -> list[Difference]:
    """Normalise both sides under `rules` (for this method and name) and diff them."""
    if old == new:
        return []
    if method in PROBES:
        old, new = _refusal(old), _refusal(new)
    paths = rules.for_call(method, name)
    return diff(
        normalise(old, paths, defaults=rules.defaults),
        normalise(new, paths, defaults=rules.defaults),
    )


def _refusal(answer: Any) -> Any:
    """A probe's error answer as the one outcome it is (its notifications kept)."""
    if isinstance(answer, dict) and "error" in answer:
        return {**answer, "error": REFUSED}
    return answer


def generalise(path: str) -> str:
    """A learned rule from a changed path: list indexes become `[*]`."""
    return format_path(tuple("*" if isinstance(token, int) else token for token in parse_path(path)))


def slower(old: float | None, new: float | None, *, factor: float, slack: float) -> bool:
    """Whether `new` latency counts as a regression from `old` (both in seconds)."""
    if factor <= 0 or old is None or new is None:
        return False
    return new > old * factor and new - old > slack
