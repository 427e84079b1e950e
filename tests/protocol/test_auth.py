"""The sans-IO side of authorization: challenges, discovery documents, token requests and answers, renewal."""

import base64

import orjson
import pytest

from mcpbench.protocol import auth
from mcpbench.protocol.auth import (
    Challenge,
    DiscoveryError,
    Token,
    TokenRefused,
    bearer_challenge,
    parse_challenges,
    read_resource_metadata,
    read_server_metadata,
    read_token_response,
    resource_metadata_urls,
    server_metadata_urls,
    token_request,
)
from mcpbench.protocol.errors import EXIT_ENVIRONMENT, EXIT_INPUT
from mcpbench.protocol.http import Failure, PostAnswer, classify_status

SDK_CHALLENGE = ('Bearer error="invalid_token", error_description="Authentication required", '
                 'resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"')


@pytest.mark.parametrize(("value", "expected"), [
    (SDK_CHALLENGE, [("bearer", {"error": "invalid_token", "error_description": "Authentication required",
                                 "resource_metadata": "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"}, None)]),
    ('Bearer resource_metadata="https://a/x", scope="mcp files:read"',
     [("bearer", {"resource_metadata": "https://a/x", "scope": "mcp files:read"}, None)]),
    ('Basic realm="a b", Bearer error=insufficient_scope, scope=mcp',
     [("basic", {"realm": "a b"}, None), ("bearer", {"error": "insufficient_scope", "scope": "mcp"}, None)]),
    ("Negotiate dGVzdA==, Bearer", [("negotiate", {}, "dGVzdA=="), ("bearer", {}, None)]),
    ('Bearer realm="quoted \\"inner\\" text"', [("bearer", {"realm": 'quoted "inner" text'}, None)]),
    ("", []),
    (None, []),
])
def test_challenges_are_read_as_rfc_9110_writes_them(value, expected):
    assert [(c.scheme, c.params, c.token68) for c in parse_challenges(value)] == expected


def test_the_bearer_challenge_is_picked_and_summarised_without_its_description():
    challenge = bearer_challenge('Basic realm="x", ' + SDK_CHALLENGE)
    assert challenge.scheme == "bearer"
    assert challenge.summary() == "Bearer error=invalid_token resource_metadata=http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"
    assert challenge.to_json() == {"resource_metadata": challenge.resource_metadata, "error": "invalid_token"}
    assert bearer_challenge("Basic realm=x").scheme == "basic"  # no Bearer: the first


def test_401_and_a_bearer_403_are_authentication_a_plain_403_is_not():
    bearer = bearer_challenge('Bearer error="insufficient_scope"')
    assert classify_status(401, has_session=True) == Failure.AUTH_REQUIRED
    assert classify_status(403, has_session=True, challenge=bearer) == Failure.AUTH_FORBIDDEN
    assert classify_status(403, has_session=True) == Failure.HTTP_4XX  # Invalid Origin header
    assert classify_status(404, has_session=True, challenge=bearer) == Failure.SESSION_NOT_FOUND


def test_a_401_answer_names_its_challenge_not_its_body():
    answer = PostAnswer(1, 401, "application/json", has_session=False, challenge=bearer_challenge(SDK_CHALLENGE))
    (problem,) = answer.feed(b'{"error": "invalid_token"}') + answer.feed(b"")
    assert problem.failure == Failure.AUTH_REQUIRED
    assert problem.detail == "HTTP 401 (Bearer error=invalid_token resource_metadata=http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp)"


def test_discovery_urls_follow_the_challenge_else_the_well_known_paths():
    assert resource_metadata_urls("https://h/mcp", Challenge("bearer", {"resource_metadata": "https://m/x"})) == ["https://m/x"]
    assert resource_metadata_urls("https://h:8443/api/mcp", None) == [
        "https://h:8443/.well-known/oauth-protected-resource/api/mcp", "https://h:8443/.well-known/oauth-protected-resource"]
    assert resource_metadata_urls("http://h/", None) == ["http://h/.well-known/oauth-protected-resource"]
    assert server_metadata_urls("https://auth.example") == [
        "https://auth.example/.well-known/oauth-authorization-server", "https://auth.example/.well-known/openid-configuration"]
    assert server_metadata_urls("https://auth.example/tenant1") == [
        "https://auth.example/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example/.well-known/openid-configuration/tenant1",
        "https://auth.example/tenant1/.well-known/openid-configuration"]


def test_metadata_documents_are_read_or_refused_in_one_line():
    doc = orjson.dumps({"resource": "https://h/mcp", "authorization_servers": ["https://a"], "scopes_supported": ["mcp"]})
    assert read_resource_metadata(200, "application/json", doc, "u") == auth.ResourceMetadata("https://h/mcp", ("https://a",), ("mcp",))
    server = read_server_metadata(200, "application/json", orjson.dumps({
        "issuer": "https://a", "token_endpoint": "https://a/token", "token_endpoint_auth_methods_supported": ["client_secret_post"]}), "u")
    assert server.token_endpoint == "https://a/token" and server.auth_method == auth.POST
    assert read_server_metadata(200, None, b'{"token_endpoint": "https://a/t"}', "u").auth_method == auth.BASIC
    for status, body, reason in (
        (200, b"<html><title>Sign in</title></html>", "not JSON"),
        (404, b"Not Found", "HTTP 404"),
        (200, b'{"resource": "x"}', "no authorization_servers"),
    ):
        with pytest.raises(DiscoveryError, match=reason) as caught:
            read_resource_metadata(status, "text/html", body, "https://h/.well-known/oauth-protected-resource")
        assert caught.value.exit_code == EXIT_ENVIRONMENT and "\n" not in str(caught.value)


def test_the_token_request_sends_the_secret_by_basic_or_in_the_form():
    body, headers = token_request("my client", "s3cr:t&", scope="mcp files", resource="https://h/mcp")
    assert body == b"grant_type=client_credentials&scope=mcp+files&resource=https%3A%2F%2Fh%2Fmcp"
    assert base64.b64decode(headers["authorization"][6:]) == b"my+client:s3cr%3At%26"  # RFC 6749 §2.3.1
    body, headers = token_request("c", "s", auth_method=auth.POST, audience="api")
    assert body == b"grant_type=client_credentials&client_id=c&client_secret=s&audience=api" and "authorization" not in headers


def test_token_answers_give_a_token_a_refusal_or_say_they_are_no_oauth():
    token = read_token_response(200, "application/json", b'{"access_token": "t0k", "token_type": "bearer", "expires_in": 10}',
                                "u", obtained=100.0)
    assert (token.header, token.expires_in) == ("Bearer t0k", 10.0)
    assert "t0k" not in repr(token)
    with pytest.raises(TokenRefused) as refused:
        read_token_response(401, "application/json", b'{"error": "invalid_client", "error_description": "wrong secret"}',
                            "https://a/token", obtained=0)
    assert refused.value.exit_code == EXIT_INPUT
    assert str(refused.value) == "token request to https://a/token refused: invalid_client (wrong secret)"
    for status, body in ((200, b"<html><title>Login</title></html>"), (404, b"Not Found"), (200, b'{"token_type": "Bearer"}')):
        with pytest.raises(DiscoveryError):
            read_token_response(status, "text/html", body, "https://a/token", obtained=0)


def test_a_token_is_renewed_a_share_of_its_lifetime_before_it_expires():
    short, long, forever = Token("a", 100.0, 10.0), Token("b", 100.0, 3600.0), Token("c", 100.0, None)
    assert not short.due(107.9) and short.due(108.0)  # 20 % of 10 s ahead
    assert not long.due(3639.9) and long.due(3640.0)  # at most 60 s ahead
    assert not forever.due(1e9)
