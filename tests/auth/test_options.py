"""The user's headers, proxies and client options, read without any server: what is sent, what is refused."""

import click
import pytest
from click.testing import CliRunner

from mcpbench.auth import headers
from mcpbench.auth.oauth import OAuthConfig
from mcpbench.auth.options import ClientOptions, client_options
from mcpbench.auth.proxy import ProxySettings, parse_proxy
from mcpbench.protocol.errors import EXIT_INPUT, CredentialError

SECRET = "s3cret-value-never-shown"


def test_header_values_come_as_written_from_a_variable_or_from_a_file(tmp_path):
    (tmp_path / "key.txt").write_text(SECRET + "\n")
    env = {"API_KEY": SECRET}
    specs = ["X-Tenant: acme", "X-Api-Key: $API_KEY", "X-Braced: ${API_KEY}", "X-File: @key.txt", "X-Empty:"]
    assert headers.expand_all(specs, environ=env, base=tmp_path) == {
        "x-tenant": "acme", "x-api-key": SECRET, "x-braced": SECRET, "x-file": SECRET, "x-empty": ""}
    assert headers.expand_all(["X-Price: US$5"], environ={}) == {"x-price": "US$5"}  # only a whole value is a variable
    assert headers.shown("X-Api-Key: $API_KEY") == "X-Api-Key: $API_KEY"
    assert headers.shown(f"X-Api-Key: {SECRET}") == "X-Api-Key: (given)"


@pytest.mark.parametrize(("spec", "message"), [
    (f"X-Api-Key {SECRET}", "--header 'X-Api-Key': expected 'Name: value' (no colon)"),
    ("X-Api-Key: $NOT_SET", "--header X-Api-Key: environment variable NOT_SET is not set"),
    ("X-Api-Key: @missing.txt", "--header X-Api-Key: cannot read {base}/missing.txt: No such file or directory"),
    ("Bad Name: x", "--header: 'Bad Name' is not a header name"),
    ("Host: evil.example", "--header Host: set by mcpbench itself, not an option"),
    ("X-Two: $TWO_LINES", "--header X-Two: the value spans lines (a header value is one line)"),
])
def test_a_header_that_cannot_be_used_is_one_line_naming_it_and_never_its_value(tmp_path, spec, message):
    with pytest.raises(CredentialError) as caught:
        headers.expand_all([spec], environ={"TWO_LINES": f"{SECRET}\nX-Injected: 1"}, base=tmp_path)
    assert str(caught.value) == message.format(base=tmp_path)
    assert caught.value.exit_code == EXIT_INPUT and SECRET not in str(caught.value)


@pytest.mark.parametrize(("environ", "url", "expected"), [
    ({"HTTPS_PROXY": "http://p:3128"}, "https://h/mcp", "p:3128"),
    ({"HTTPS_PROXY": "http://p:3128"}, "http://h/mcp", None),  # http needs HTTP_PROXY
    ({"https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2"}, "https://h/", "lower:1"),  # lower case wins
    ({"HTTP_PROXY": "http://p:8080"}, "http://h/mcp", "p:8080"),
    ({"HTTP_PROXY": "http://p:8080", "REQUEST_METHOD": "GET"}, "http://h/mcp", None),  # httpoxy
    ({"ALL_PROXY": "p:9"}, "http://h/", "p:9"),  # no scheme: http
    ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "example.com"}, "http://api.example.com/", None),
    ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "example.com"}, "http://badexample.com/", "p:1"),  # tail at a dot only
    ({"HTTP_PROXY": "http://p:1", "NO_PROXY": ".example.com"}, "http://example.com/", None),
    ({"HTTP_PROXY": "http://p:1", "no_proxy": "127.0.0.0/8, ::1"}, "http://127.0.0.5:9/", None),
    ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "h:8080"}, "http://h:9090/", "p:1"),
    ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "h:8080"}, "http://h:8080/", None),
    ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "*"}, "http://h/", None),
    ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "[::1]"}, "http://[::1]:80/", None),
])
def test_proxies_are_read_from_the_environment_as_curl_and_requests_read_them(environ, url, expected):
    proxy = ProxySettings.read(environ).route(url)
    assert (f"{proxy.host}:{proxy.port}" if proxy else None) == expected


def test_an_explicit_proxy_wins_over_the_environment_and_carries_its_credentials():
    settings = ProxySettings.read({"HTTP_PROXY": "http://env:1", "NO_PROXY": "skip.example"}, f"http://u%40x:{SECRET}@p:3128")
    proxy = settings.route("http://h/mcp")
    assert (proxy.host, proxy.port, proxy.username) == ("p", 3128, "u@x")
    assert proxy.authorization.startswith("Basic ") and SECRET not in proxy.url and SECRET not in repr(proxy)
    assert settings.route("http://skip.example/") is None  # NO_PROXY applies to --proxy too, as in curl


@pytest.mark.parametrize("text", [f"socks5://u:{SECRET}@p:1080", f"http://u:{SECRET}@p:notaport", "http://u:pw@/", "http://p:1/path"])
def test_a_proxy_url_that_cannot_be_used_is_refused_without_its_credentials(text):
    with pytest.raises(CredentialError) as caught:
        parse_proxy(text)
    assert caught.value.exit_code == EXIT_INPUT and SECRET not in str(caught.value) and "--proxy" in str(caught.value)


def test_options_resolve_to_what_is_sent_and_refuse_conflicts():
    env = {"TOKEN": SECRET, "OAUTH_SECRET": SECRET}
    access = ClientOptions(("X-Tenant: t",), bearer_token_env="TOKEN").resolve("http://h/mcp", env)
    assert access.headers == {"x-tenant": "t", "authorization": f"Bearer {SECRET}"} and access.credentials
    oauth = OAuthConfig(client_id="c", client_secret_env="OAUTH_SECRET", discover=True)
    for options, message in (
        (ClientOptions(bearer_token_env="UNSET"), "--bearer-token-env: environment variable UNSET is not set"),
        (ClientOptions(bearer_token_env="TOKEN", oauth=oauth), "give --bearer-token-env or OAuth, not both"),
        (ClientOptions(("Authorization: x",), bearer_token_env="TOKEN"), "give --bearer-token-env or an Authorization header"),
        (ClientOptions(oauth=OAuthConfig(client_id="c", client_secret_env="UNSET", discover=True)),
         "oauth client_secret_env: environment variable UNSET is not set"),
    ):
        with pytest.raises(CredentialError, match=message):
            options.resolve("http://h/mcp", env)
    with pytest.raises(CredentialError, match="HTTP targets, not stdio"):
        ClientOptions(("X-A: b",)).resolve(None, env)
    assert ClientOptions(proxy="http://p:1").resolve(None, env).proxies.explicit is not None  # a proxy alone is harmless


def test_the_options_written_to_a_results_file_hold_no_secret():
    options = ClientOptions((f"X-Api-Key: {SECRET}", "X-B: $VAR"), oauth=OAuthConfig(client_id="c", client_secret_env="V", token_url="https://a/t"),
                            proxy=f"http://u:{SECRET}@p:1")
    written = str(options.to_json())
    assert SECRET not in written and "$VAR" in written and "client_secret_env" in written
    assert ClientOptions.from_json(options.to_json()).oauth == options.oauth


@pytest.mark.parametrize(("mapping", "message"), [
    ({"client_id": "c", "client_secret_env": "V"}, "give token_url or discover: true"),
    ({"discover": True, "token_url": "https://a", "client_id": "c", "client_secret_env": "V"}, "give token_url or discover: true"),
    ({"discover": True, "client_secret_env": "V"}, "client_id is required"),
    ({"discover": "yes", "client_id": "c", "client_secret_env": "V"}, "oauth discover: must be true or false"),
    ({"discover": True, "client_id": "c", "client_secret_env": "V", "secret": "x"}, "unknown key 'secret'"),
    ({"token_url": "auth.example/token", "client_id": "c", "client_secret_env": "V"}, "is not an http"),
])
def test_oauth_settings_are_checked_key_by_key(mapping, message):
    with pytest.raises(ValueError, match=message):
        OAuthConfig.from_mapping(mapping)


def test_the_click_decorator_gives_the_command_one_options_object():
    seen = []

    @click.command()
    @client_options
    def command(client):
        seen.append(client)

    result = CliRunner().invoke(command, ["-H", "X-A: 1", "--header", "X-B: $B", "--proxy", "http://p:1", "--oauth-discover",
                                          "--oauth-client-id", "c", "--oauth-client-secret-env", "S", "--oauth-shared"])
    assert result.exit_code == 0, result.output
    (options,) = seen
    assert options.headers == ("X-A: 1", "X-B: $B") and options.proxy == "http://p:1"
    assert options.oauth == OAuthConfig(client_id="c", client_secret_env="S", discover=True, shared=True)
    result = CliRunner().invoke(command, ["--oauth-scope", "mcp"])
    assert result.exit_code == 2 and "--oauth-*: give token_url or discover: true" in result.output
