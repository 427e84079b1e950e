"""URI references, pure: split, resolve against a base, read a query.

The legacy transport's `endpoint` event names its POST URI relative to the stream's URL
(2024-11-05, "HTTP with SSE"), and the core reads the session out of that URI's query. These
functions give the answers `urllib.parse.urlsplit`, `urljoin` and `parse_qsl(keep_blank_values=True)`
give (Python 3.12), which the core may not import (it stays free of I/O modules and their packages).
"""

import ipaddress
import re
import unicodedata
from dataclasses import dataclass

# Schemes whose references resolve against a base, whose authority is written `//host`, and whose
# last path segment may carry `;params` (urllib.parse's uses_relative, uses_netloc, uses_params).
RELATIVE = frozenset({"", "ftp", "http", "gopher", "nntp", "imap", "wais", "file", "https", "shttp", "mms", "prospero",
                      "rtsp", "rtsps", "rtspu", "sftp", "svn", "svn+ssh", "ws", "wss"})
NETLOC = frozenset({"", "ftp", "http", "gopher", "nntp", "telnet", "imap", "wais", "file", "mms", "https", "shttp",
                    "snews", "prospero", "rtsp", "rtsps", "rtspu", "rsync", "svn", "svn+ssh", "sftp", "nfs", "git",
                    "git+ssh", "ws", "wss", "itms-services"})
PARAMS = frozenset({"", "ftp", "hdl", "prospero", "http", "imap", "https", "shttp", "rtsp", "rtsps", "rtspu", "sip",
                    "sips", "mms", "sftp", "tel"})
SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")
# WHATWG URL: leading C0 controls and spaces are stripped; tab and newlines are removed anywhere.
LEADING_JUNK = "".join(map(chr, range(0x21)))
REMOVED = ("\t", "\r", "\n")
ESCAPES = re.compile(r"((?:%[0-9A-Fa-f]{2})+)")
IP_FUTURE = re.compile(r"\Av[a-fA-F0-9]+\..+\Z")


@dataclass(frozen=True, slots=True)
class Uri:
    """The five parts of a URI reference (RFC 3986, section 3), without their delimiters."""

    scheme: str
    netloc: str
    path: str
    query: str
    fragment: str


def split(uri: str, scheme: str = "") -> Uri:
    """A URI reference's parts; `scheme` when it names none. The scheme is lower-cased.

    Raises:
        ValueError: a `[` without its `]` (or the reverse) in the authority, a bracketed host that is
            no IPv6 or IPvFuture address, or non-ASCII that NFKC turns into a delimiter there.
    """
    uri = uri.lstrip(LEADING_JUNK)
    scheme = scheme.strip(LEADING_JUNK)
    for junk in REMOVED:
        uri, scheme = uri.replace(junk, ""), scheme.replace(junk, "")
    netloc = query = fragment = ""
    colon = uri.find(":")
    if colon > 0 and uri[0].isascii() and uri[0].isalpha() and all(c in SCHEME_CHARS for c in uri[:colon]):
        scheme, uri = uri[:colon].lower(), uri[colon + 1:]
    if uri[:2] == "//":
        end = min((i for i in (uri.find(c, 2) for c in "/?#") if i >= 0), default=len(uri))
        netloc, uri = uri[2:end], uri[end:]
        if ("[" in netloc) != ("]" in netloc):
            raise ValueError("Invalid IPv6 URL")
        if "[" in netloc:
            _check_bracketed_host(netloc.partition("[")[2].partition("]")[0])
    if "#" in uri:
        uri, fragment = uri.split("#", 1)
    if "?" in uri:
        uri, query = uri.split("?", 1)
    _check_netloc(netloc)
    return Uri(scheme, netloc, uri, query, fragment)


def _check_bracketed_host(host: str) -> None:
    """RFC 3986, section 3.2.2: brackets hold an IPv6 address or an IPvFuture `vX.…`, nothing else."""
    if host.startswith("v"):
        if not IP_FUTURE.match(host):
            raise ValueError("IPvFuture address is invalid")
    elif isinstance(ipaddress.ip_address(host), ipaddress.IPv4Address):  # raises ValueError when neither
        raise ValueError("An IPv4 address cannot be in brackets")


def _check_netloc(netloc: str) -> None:
    """Refuse an authority whose characters NFKC (as IDNA applies it) turns into `/?#@:`, such as U+2100."""
    if not netloc or netloc.isascii():
        return
    plain = netloc.replace("@", "").replace(":", "").replace("#", "").replace("?", "")
    normal = unicodedata.normalize("NFKC", plain)
    if normal != plain and any(c in normal for c in "/?#@:"):
        raise ValueError(f"netloc '{netloc}' contains invalid characters under NFKC normalization")


def _split_params(path: str) -> tuple[str, str]:
    """`/a/b;p` -> (`/a/b`, `p`): params belong to the last segment only."""
    at = path.find(";", path.rfind("/")) if "/" in path else path.find(";")
    return (path, "") if at < 0 else (path[:at], path[at + 1:])


def _unsplit(scheme: str, netloc: str, path: str, params: str, query: str, fragment: str) -> str:
    if params:
        path = f"{path};{params}"
    if netloc or (scheme and scheme in NETLOC and path[:2] != "//"):
        if path and path[:1] != "/":
            path = "/" + path
        path = "//" + netloc + path
    if scheme:
        path = scheme + ":" + path
    if query:
        path += "?" + query
    if fragment:
        path += "#" + fragment
    return path


def _with_params(parts: Uri) -> tuple[str, str, str, str, str, str]:
    path, params = _split_params(parts.path) if parts.scheme in PARAMS and ";" in parts.path else (parts.path, "")
    return parts.scheme, parts.netloc, path, params, parts.query, parts.fragment


def join(base: str, reference: str) -> str:
    """`reference` resolved against `base` (RFC 3986, section 5.2, as urllib.parse.urljoin does it).

    A reference with another scheme, or one that does not resolve relatively, comes back unchanged;
    `.` and `..` segments are removed, and so are empty segments of a relative path.
    """
    if not base:
        return reference
    if not reference:
        return base
    bscheme, bnetloc, bpath, bparams, bquery, _ = _with_params(split(base))
    scheme, netloc, path, params, query, fragment = _with_params(split(reference, bscheme))
    if scheme != bscheme or scheme not in RELATIVE:
        return reference
    if scheme in NETLOC:
        if netloc:
            return _unsplit(scheme, netloc, path, params, query, fragment)
        netloc = bnetloc
    if not path and not params:
        return _unsplit(scheme, netloc, bpath, bparams, query or bquery, fragment)
    if path[:1] == "/":
        segments = path.split("/")
    else:
        directory = bpath.split("/")
        if directory[-1] != "":
            del directory[-1]  # the base's last segment is a file: not part of the directory
        segments = directory + path.split("/")
        segments[1:-1] = filter(None, segments[1:-1])
    resolved: list[str] = []
    for segment in segments:
        if segment == "..":
            if resolved:
                resolved.pop()
        elif segment != ".":
            resolved.append(segment)
    if segments[-1] in (".", ".."):
        resolved.append("")  # `a/..` names a directory: keep its trailing slash
    return _unsplit(scheme, netloc, "/".join(resolved) or "/", params, query, fragment)


def unquote(text: str) -> str:
    """Percent-escapes decoded as UTF-8 (an invalid sequence becomes U+FFFD); a lone `%` stays."""
    if "%" not in text:
        return text
    parts = ESCAPES.split(text)
    parts[1::2] = [bytes.fromhex(run.replace("%", "")).decode("utf-8", "replace") for run in parts[1::2]]
    return "".join(parts)


def query_pairs(query: str) -> list[tuple[str, str]]:
    """A query's `name=value` pairs in order, `+` as space and percent-escapes decoded; a name without
    `=` has the value "", empty fields are skipped."""
    pairs = []
    for field in query.split("&") if query else []:
        if not field:
            continue
        name, _, value = field.partition("=")
        pairs.append((unquote(name.replace("+", " ")), unquote(value.replace("+", " "))))
    return pairs
