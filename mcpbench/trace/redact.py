"""Redaction: secrets never reach a trace file.

A redacted value becomes `redacted:<12 hex>`, a salted SHA-256 of the value,
so two equal secrets stay comparable in a trace without being readable.

Rules are header names (case-insensitive) and JSON paths into a message:
`params.arguments.api_key` (dot-separated), `*` matching any one key or list
index, and a bare name such as `password` matching that key at any depth. A
bare name also names a URL query parameter: hosted MCP servers often take an
API key in the URL (`/mcp?api_key=…`), so common secret parameters are
redacted by default too.
"""

import hashlib
from typing import Any, Iterable
from urllib.parse import unquote_plus

DEFAULT_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"}
)

# Query parameters (case-insensitive) that carry secrets in MCP server URLs,
# OAuth redirects and signed links.
DEFAULT_QUERY = frozenset(
    {"access_token", "api_key", "apikey", "api-key", "auth", "client_secret", "code", "key", "password",
     "secret", "sig", "signature", "token"}
)

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
            name = name.lower()
            if name in self.headers:
                value = fingerprint(value)
            out[name] = f"{out[name]}, {value}" if name in out else value
        return out

    def url(self, url: str) -> str:
        """`url` (absolute, or a path with its query) with secret query values replaced.

        Everything else stays as written, percent-encoding included: the
        recorded path must still show what the client sent.
        """
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
