"""protocol/uri.py: the same answers as urllib.parse, which the sans-IO core may not import."""

import urllib.parse

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mcpbench.protocol import uri
from mcpbench.protocol.http import legacy_session_key, resolve_endpoint, same_origin
from tests.support.fuzz import at_least

BASE = "http://a/b/c/d;p?q"
# RFC 3986, section 5.4.1 and 5.4.2: references resolved against BASE (as urljoin gives them:
# it keeps the trailing `..` of "../../../g" out, and drops the empty segment of "g/../h//x").
RFC_EXAMPLES = {
    "g:h": "g:h", "g": "http://a/b/c/g", "./g": "http://a/b/c/g", "g/": "http://a/b/c/g/", "/g": "http://a/g",
    "//g": "http://g", "?y": "http://a/b/c/d;p?y", "g?y": "http://a/b/c/g?y", "#s": "http://a/b/c/d;p?q#s",
    "g#s": "http://a/b/c/g#s", "g?y#s": "http://a/b/c/g?y#s", ";x": "http://a/b/c/;x", "g;x": "http://a/b/c/g;x",
    "g;x?y#s": "http://a/b/c/g;x?y#s", "": BASE, ".": "http://a/b/c/", "./": "http://a/b/c/", "..": "http://a/b/",
    "../": "http://a/b/", "../g": "http://a/b/g", "../..": "http://a/", "../../": "http://a/", "../../g": "http://a/g",
    "../../../g": "http://a/g", "/./g": "http://a/g", "/../g": "http://a/g", "g.": "http://a/b/c/g.",
    ".g": "http://a/b/c/.g", "g..": "http://a/b/c/g..", "..g": "http://a/b/c/..g", "./../g": "http://a/b/g",
    "./g/.": "http://a/b/c/g/", "g/./h": "http://a/b/c/g/h", "g/../h": "http://a/b/c/h", "g;x=1/./y": "http://a/b/c/g;x=1/y",
    "g;x=1/../y": "http://a/b/c/y", "g?y/./x": "http://a/b/c/g?y/./x", "http:g": "http://a/b/c/g",
}

# URL-ish text: the delimiters, dot segments, escapes, brackets and a few non-ASCII letters.
PIECES = ["/", "//", ".", "..", "?", "#", ";", "=", "&", "+", "%", "%2F", "%e2%82%ac", "%C3", "%zz", ":", "@", "[", "]",
          "[::1]", "a", "b", "é", "℀", "http:", "https:", "ftp:", "x-y:", " ", "\t", "\n", "sessionId", "127.0.0.1:8", "v1.x"]
text = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)
bases = st.builds(lambda scheme, host, path, query: f"{scheme}://{host}{path}{query}",
                  st.sampled_from(["http", "https", "HTTP"]), st.sampled_from(["127.0.0.1:8000", "a", "h:1", "[::1]:9"]),
                  st.lists(st.sampled_from(["/", "sse", "mcp", "a;p", ".", ".."]), max_size=5).map("".join),
                  st.sampled_from(["", "?", "?x=1", "?a=b&c"]))


def outcome(function, *args):
    """What a call gives: its value, or its exception's type and text."""
    try:
        return function(*args)
    except ValueError as error:
        return ("ValueError", str(error))


@pytest.mark.parametrize(("reference", "expected"), RFC_EXAMPLES.items())
def test_rfc_3986_examples(reference, expected):
    assert uri.join(BASE, reference) == expected == urllib.parse.urljoin(BASE, reference)


@pytest.mark.fuzz
@settings(max_examples=at_least(400))
@given(bases | text, text)
@example("http://127.0.0.1:8000/sse", "/messages/?session_id=ab12")
@example("http://127.0.0.1:8000/a/sse", "messages?sessionId=1")
@example("http://127.0.0.1:8000/sse", "http://127.0.0.1:9/messages/")
@example("http://127.0.0.1:8000/sse", "//other/x")
def test_join_is_urljoin(base, reference):
    assert outcome(uri.join, base, reference) == outcome(urllib.parse.urljoin, base, reference)


@pytest.mark.fuzz
@settings(max_examples=at_least(400))
@given(bases | text)
@example("http://[::1/x")
@example("http://[1.2.3.4]/")
@example("http://[vz.1]/")
@example("http://a\u2100b/")
def test_split_is_urlsplit(value):
    expected = outcome(urllib.parse.urlsplit, value)
    got = outcome(uri.split, value)
    if isinstance(expected, urllib.parse.SplitResult):
        expected = (expected.scheme, expected.netloc, expected.path, expected.query, expected.fragment)
        got = (got.scheme, got.netloc, got.path, got.query, got.fragment) if isinstance(got, uri.Uri) else got
    assert got == expected


@pytest.mark.fuzz
@settings(max_examples=at_least(400))
@given(text)
@example("session_id=ab%2012&&x")
@example("a=%e2%82%ac%C3(%zz+b")
def test_query_pairs_is_parse_qsl_keeping_blank_values(query):
    assert uri.query_pairs(query) == urllib.parse.parse_qsl(query, keep_blank_values=True)


def test_the_legacy_endpoint_rules_read_through_it():
    assert resolve_endpoint("http://127.0.0.1:8000/sse", " /messages/?session_id=ab12\n") == "http://127.0.0.1:8000/messages/?session_id=ab12"
    assert resolve_endpoint("http://127.0.0.1:8000/a/sse", "messages?x=1") == "http://127.0.0.1:8000/a/messages?x=1"
    assert same_origin("HTTP://127.0.0.1:8000/sse", "http://127.0.0.1:8000/messages/")
    assert not same_origin("http://127.0.0.1:8000/sse", "http://127.0.0.1:8001/sse")
    assert legacy_session_key("/messages/?session_id=ab%2012") == "ab 12"
    assert legacy_session_key("/messages/?a=1&b=2") == "a=1&b=2"
    assert legacy_session_key("/messages/?flag") == "flag"
    assert legacy_session_key("/messages/") == "/messages/"
