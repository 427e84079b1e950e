"""Redaction: secrets never reach a trace file.

A redacted value becomes `redacted:<12 hex>`, a salted SHA-256 of the value,
so two equal secrets stay comparable in a trace without being readable.

Rules are header names (case-insensitive) and JSON paths into a message:
`params.arguments.api_key` (dot-separated), `*` matching any one key or list
index, and a bare name such as `password` matching that key at any depth. A
bare name also names a URL query parameter: hosted MCP servers often take an
API key in the URL (`/mcp?api_key=…`), so common secret parameters are
redacted by default too.

Secrets also land where no parser applies: a body that is not JSON, an SSE
comment, a stdio junk or stderr line, a command line, an error message. `text`
and `argv` find them by shape (`NAME=value`, `"NAME": value`, `NAME: value`
lines, `--NAME value`, `Bearer …`, `user:password@` in URLs); the trace writer
applies them to every free-text field of an event (`TEXT_FIELDS`).
"""

import base64
import functools
import hashlib
import re
from typing import Any, Iterable
from urllib.parse import unquote_plus

DEFAULT_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-auth-token", "x-access-token"}
)

# Query parameters (case-insensitive) that carry secrets in MCP server URLs,
# OAuth redirects and signed links, and in OAuth's token request forms (RFC 6749, 7523, 7636, 8628, 8693).
DEFAULT_QUERY = frozenset(
    {"access_token", "actor_token", "api_key", "apikey", "api-key", "assertion", "auth", "client_assertion",
     "client_secret", "code", "code_verifier", "device_code", "id_token", "key", "password", "refresh_token",
     "secret", "sig", "signature", "subject_token", "token"}
)

# Key names whose values free text hides by default, in `"NAME": value` and `--NAME value`. Narrower
# than DEFAULT_QUERY: `code` and `key` are JSON-RPC error fields and common words in text.
DEFAULT_TEXT_KEYS = frozenset({"access_token", "api_key", "apikey", "api-key", "client_secret", "id_token", "password",
                               "refresh_token", "secret", "token"})

# Event fields that hold free text (bodies, comments, lines, messages) or command lines (lists).
TEXT_FIELDS = ("raw", "body", "request_body", "comment", "text", "detail", "error", "data")
ARGV_FIELDS = ("command", "argv")
_FREE_FIELDS = frozenset(TEXT_FIELDS + ARGV_FIELDS)

# A fingerprint is never fingerprinted again: redacting is idempotent, and a legacy session key
# taken from an already redacted endpoint stays the same as that endpoint's.
_VALUE = r"(?!redacted:)"
# A credential after its scheme is a token68 (RFC 9110 §11.2); a challenge's `name=value` parameters
# (`Bearer resource_metadata="…"`) are no credential and stay readable.
_SCHEMES = re.compile(r"(?i)\b(bearer|basic|token|digest)(\s+)(?!redacted:)([A-Za-z0-9._~+/-]{8,}=*)(?![A-Za-z0-9._~+/=\"-])")
_SCHEME_STARTS = frozenset({"bearer", "basic ", "token ", "digest"})
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+)(:)(?!redacted:)([^/\s@]+)(?=@)")

# A fixed salt keeps generic precomputed tables of SHA-256 digests from working;
# it is not a secret, so weak secrets can still be guessed: redaction hides
# values from readers of a trace, it does not protect against brute force.
_SALT = b"mcpbench-redact-v1:"


def fingerprint(value: Any) -> str:
    raw = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")
    return "redacted:" + hashlib.sha256(_SALT + raw).hexdigest()[:12]


class Redactor:
    """Applies header and JSON-path rules.

    Args:
        rules: extra rules from `--redact`: a name containing a dot or `*` is a
            JSON path; any other name is both a header name and a JSON key
            matched at any depth.
        defaults: keep the default header list (Authorization, cookies, API keys).
    """

    def __init__(self, rules: Iterable[str] = (), *, defaults: bool = True) -> None:
        self.headers = set(DEFAULT_HEADERS if defaults else ())
        self.query = set(DEFAULT_QUERY if defaults else ())
        self.keys: set[str] = set()
        self.paths: list[tuple[str, ...]] = []
        for rule in rules:
            rule = rule.strip()
            if not rule:
                continue
            if "." in rule or "*" in rule:
                self.paths.append(tuple(rule.removeprefix("$.").split(".")))
            else:
                self.headers.add(rule.lower())
                self.query.add(rule.lower())
                self.keys.add(rule)

    @functools.cached_property
    def _text_patterns(self) -> list[re.Pattern]:
        """The free-text patterns of these rules (built on first use: most writers never need them)."""
        keys = self.keys | DEFAULT_TEXT_KEYS | self.headers | {path[-1] for path in self.paths if path[-1] != "*"}
        names = "|".join(sorted(map(re.escape, self.query | keys), key=len, reverse=True))
        key_names = "|".join(sorted(map(re.escape, keys), key=len, reverse=True))
        headers = "|".join(sorted(map(re.escape, self.headers), key=len, reverse=True))
        # A quick look first (substring tests: a regex alternation of these is slower than all the
        # patterns): text that names no secret and has no `@` needs none of the patterns.
        self._hint_words = tuple(sorted(self.query | keys | {"bearer", "basic", "digest", "@"}))
        return [
            # NAME=value: queries, form bodies, `--token=…`, `API_KEY=…` in a command line
            re.compile(rf"(?i)(?<![A-Za-z0-9_])({names})(=){_VALUE}([^&\s\"'#;,<>]+)"),
            # "NAME": value in JSON-ish text (what a JSON body that failed to parse still shows)
            re.compile(rf"(?i)(\"(?:{key_names})\"\s*)(:\s*)(?!\"redacted:){_VALUE}(\"(?:[^\"\\]|\\.)*\"?|[^,}}\]\s]+)"),
            # NAME: value on a line of its own (a header dumped to stdout or stderr)
            re.compile(rf"(?im)^(\s*(?:{headers}))(\s*:[ \t]*){_VALUE}([^\r\n]+)"),
            # --NAME value on a command line
            re.compile(rf"(?i)(?<![A-Za-z0-9_])(--?(?:{key_names}))(\s+){_VALUE}([^\s-]\S*?)(?=[:;,.]?(?:\s|$))"),
            _SCHEMES,
            _USERINFO,
        ]

    def text(self, text: str) -> str:
        """Free text with every secret these rules can find by shape replaced (see the module doc)."""
        patterns = self._text_patterns
        lower = text.lower()
        if not any(word in lower for word in self._hint_words):
            return text
        for pattern in patterns:
            text = pattern.sub(_fingerprint_third, text)
        return text

    def raw(self, data: bytes) -> bytes:
        """`text` on bytes that may not be UTF-8 (they go through unchanged where nothing matches)."""
        return self.text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def argv(self, argv: list) -> list:
        """A command line with secret values replaced: `--token X`, `--token=X`, `API_KEY=X`, URLs."""
        out = [self.text(arg) if isinstance(arg, str) else arg for arg in argv]
        keys = self.keys | DEFAULT_TEXT_KEYS | self.query
        for index in range(1, len(argv)):
            flag = argv[index - 1]
            if isinstance(flag, str) and flag.startswith("-") and flag.lstrip("-").lower() in keys:
                out[index] = fingerprint(argv[index])
        return out

    def event_text(self, event: dict[str, Any]) -> None:
        """Redact, in place, the free-text and command-line fields of one trace event."""
        if _FREE_FIELDS.isdisjoint(event):  # most events have none: one C-level pass over the keys
            return
        for name in TEXT_FIELDS:
            value = event.get(name)
            if type(value) is str:
                event[name] = self.text(value)
            elif type(value) is dict and type(value.get("b64")) is str:
                data = base64.b64decode(value["b64"])
                event[name] = {"b64": base64.b64encode(self.raw(data)).decode("ascii")}
        for name in ARGV_FIELDS:
            if type(event.get(name)) is list:
                event[name] = self.argv(event[name])

    @property
    def touches_json(self) -> bool:
        """Whether messages need to be parsed and rewritten at all."""
        return bool(self.keys or self.paths)

    def header_pairs(self, pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
        """Headers as a dict with lower-case names, secrets replaced.

        Repeated headers are joined with ", " as HTTP allows.
        """
        out: dict[str, str] = {}
        for name, value in pairs:
            name, value = self.header(name, value)
            out[name] = f"{out[name]}, {value}" if name in out else value
        return out

    def header(self, name: str, value: str) -> tuple[str, str]:
        """One header field as (lower-case name, value with secrets replaced)."""
        name = name.lower()
        if name in self.headers:
            value = fingerprint(value)
        elif "=" in value or "@" in value or value[:6].lower() in _SCHEME_STARTS:
            value = self.text(value)  # a URL in Referer or Location, a token in a header of another name
        return name, value

    def url(self, url: str) -> str:
        """`url` (absolute, or a path with its query) with secret query values replaced.

        Everything else stays as written, percent-encoding included: the
        recorded path must still show what the client sent.
        """
        if "@" in url:  # user:password@host
            url = _USERINFO.sub(_fingerprint_third, url)
        start = url.find("?")
        if start < 0:
            return url
        end = url.find("#", start)
        end = len(url) if end < 0 else end
        params = url[start + 1 : end].split("&")
        for index, param in enumerate(params):
            name, eq, value = param.partition("=")
            if eq and unquote_plus(name).lower() in self.query:
                params[index] = f"{name}={fingerprint(unquote_plus(value))}"
        return url[: start + 1] + "&".join(params) + url[end:]

    def json(self, obj: Any) -> tuple[Any, bool]:
        """A copy of `obj` with matching values replaced, and whether any was."""
        if not self.touches_json:
            return obj, False
        changed = [False]
        obj = self._keys(obj, changed) if self.keys else obj
        for path in self.paths:
            obj = self._path(obj, path, changed)
        return obj, changed[0]

    def _keys(self, obj: Any, changed: list) -> Any:
        if isinstance(obj, dict):
            out = {}
            for key, value in obj.items():
                if key in self.keys:
                    out[key] = fingerprint(value)
                    changed[0] = True
                else:
                    out[key] = self._keys(value, changed)
            return out
        if isinstance(obj, list):
            return [self._keys(item, changed) for item in obj]
        return obj

    def _path(self, obj: Any, path: tuple[str, ...], changed: list) -> Any:
        head, rest = path[0], path[1:]
        if isinstance(obj, dict):
            items = obj.items()
        elif isinstance(obj, list):
            items = ((str(i), v) for i, v in enumerate(obj))
        else:
            return obj
        out = {} if isinstance(obj, dict) else []
        for key, value in items:
            if head == "*" or head == key:
                if rest:
                    value = self._path(value, rest, changed)
                else:
                    value = fingerprint(value)
                    changed[0] = True
            if isinstance(out, dict):
                out[key] = value
            else:
                out.append(value)
        return out


def _fingerprint_third(match: re.Match) -> str:
    """A match of three groups (lead, separator, secret) with the secret fingerprinted."""
    lead, sep, value = match.group(1), match.group(2), match.group(3)
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return f'{lead}{sep}"{fingerprint(value[1:-1])}"'
    if lead.endswith('"'):  # a JSON value that is not a string: the fingerprint keeps the JSON valid
        return f'{lead}{sep}"{fingerprint(value)}"'
    return lead + sep + fingerprint(value)
