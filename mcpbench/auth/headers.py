"""The user's own headers: `Name: value`, the value read from the environment or a file when asked.

    --header 'X-Api-Key: $API_KEY'         the variable's value ($VAR or ${VAR}: the whole value)
    --header 'Authorization: @token.txt'   the file's first line (a trailing newline dropped)
    --header 'X-Tenant: acme'              as written

Secrets stay out of shell history and scenario files that way. Errors name the header, the
variable or the file, never a value.
"""

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from mcpbench.protocol.errors import CredentialError

# RFC 9110 §5.1: a field name is a token.
_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_VARIABLE = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$")
# A header value is one line (RFC 9110 §5.5): no CR, LF or NUL may reach the wire.
_BAD_VALUE = re.compile(r"[\r\n\x00]")
# The headers a client of mcpbench sets itself: a user's value would be overwritten, so it is refused.
RESERVED = frozenset({"host", "content-length", "transfer-encoding", "connection"})


def parse(text: str, *, where: str = "--header") -> tuple[str, str]:
    """`Name: value` -> (the name as written, the value as written, stripped).

    Raises:
        CredentialError: no colon, an empty or invalid name, a name mcpbench sets itself.
    """
    name, colon, value = str(text).partition(":")
    name = name.strip()
    if not colon:
        raise CredentialError(f"{where} {_name_only(text)!r}: expected 'Name: value' (no colon)")
    if not _NAME.match(name):
        raise CredentialError(f"{where}: {name!r} is not a header name")
    if name.lower() in RESERVED:
        raise CredentialError(f"{where} {name}: set by mcpbench itself, not an option")
    return name, value.strip()


def _name_only(text: str) -> str:
    """What a message may show of a header written without a colon: its first word (never a value)."""
    return str(text).strip().split(" ", 1)[0][:40]


def expand(name: str, value: str, *, environ: Mapping[str, str], base: Path | None = None, where: str = "--header") -> str:
    """A header's value with `$VAR`, `${VAR}` or `@FILE` (the whole value) read; a relative FILE is
    taken from `base` (a scenario file's folder).

    Raises:
        CredentialError: the variable is not set, the file cannot be read, or the value spans lines.
    """
    variable = _VARIABLE.match(value)
    if variable:
        key = variable.group(1) or variable.group(2)
        if key not in environ:
            raise CredentialError(f"{where} {name}: environment variable {key} is not set")
        value = environ[key]
    elif value.startswith("@") and len(value) > 1:
        path = Path(os.path.expanduser(value[1:]))
        if base is not None and not path.is_absolute():
            path = base / path
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
            raise CredentialError(f"{where} {name}: cannot read {path}: {reason}") from None
        value = text.strip("\r\n").strip()
    if _BAD_VALUE.search(value):
        raise CredentialError(f"{where} {name}: the value spans lines (a header value is one line)")
    return value


def expand_all(specs: Iterable[str], *, environ: Mapping[str, str], base: Path | None = None, where: str = "--header") -> dict[str, str]:
    """Every `Name: value` spec expanded, in order; a name given twice keeps the last value.

    Raises:
        CredentialError: for the first spec that cannot be used.
    """
    out: dict[str, str] = {}
    for spec in specs:
        name, value = parse(spec, where=where)
        out[name.lower()] = expand(name, value, environ=environ, base=base, where=where)
    return out


def shown(spec: str) -> str:
    """A spec as a file or report may show it: `$VAR` and `@FILE` as written, a literal value hidden."""
    name, colon, value = str(spec).partition(":")
    value = value.strip()
    if not colon or _VARIABLE.match(value) or value.startswith("@"):
        return str(spec)
    return f"{name.strip()}: (given)"


__all__ = ["RESERVED", "expand", "expand_all", "parse", "shown"]

