"""What a command is told to send where: `--otlp URL`, `--metrics HOST:PORT`, `--service-name NAME`.

Below the commands that record (their layer): the options are checked here, before anything starts
(a bad URL: exit 2; a metrics address in use: exit 3), and passed on as they are to whatever exports.
"""

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import click

from mcpbench.system.listen import check_listen, parse_address
from mcpbench.protocol.errors import BadTargetError

DEFAULT_SERVICE_NAME = "mcpbench"
TRACES_PATH = "/v1/traces"
METRICS_PATH = "/v1/metrics"
EXAMPLE_METRICS = "127.0.0.1:9464"


def signal_url(url: str, path: str) -> str:
    """The endpoint of one signal: `http://host:4318` (no path) or `…/v1/traces` gets `path`.

    As `OTEL_EXPORTER_OTLP_ENDPOINT` is read: a URL whose path ends in a signal's path is used with
    the asked signal's path instead; any other path is a base the signal's path is appended to.

    Raises:
        BadTargetError: not an http(s) URL with a host.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadTargetError(f"--otlp {url!r}: expected an OTLP/HTTP URL such as http://127.0.0.1:4318")
    base = parts.path.rstrip("/")
    for known in (TRACES_PATH, METRICS_PATH):
        base = base.removesuffix(known)
    return urlunsplit((parts.scheme, parts.netloc, base + path, parts.query, ""))


@dataclass(frozen=True, slots=True)
class TelemetryOptions:
    """Where spans and metrics go; nothing is sent when both are None."""

    otlp: str | None = None
    metrics: tuple[str, int] | None = None
    service_name: str = DEFAULT_SERVICE_NAME

    @classmethod
    def parse(cls, otlp: str | None, metrics: str | None, service_name: str | None = None) -> "TelemetryOptions":
        """The options from their texts, checked: the URL's shape, the metrics address free to bind.

        Raises:
            BadTargetError: a URL or address written wrongly (exit 2).
            BindError: the metrics address is in use or unknown (exit 3).
        """
        if otlp:
            signal_url(otlp, TRACES_PATH)
        address = parse_address(metrics, "--metrics", EXAMPLE_METRICS) if metrics else None
        if address is not None:
            check_listen(*address)
        return cls(otlp or None, address, service_name or DEFAULT_SERVICE_NAME)

    @property
    def any(self) -> bool:
        return bool(self.otlp or self.metrics)

    def argv(self) -> list[str]:
        """The options again as command-line arguments (for a companion process)."""
        argv = ["--service-name", self.service_name]
        if self.otlp:
            argv += ["--otlp", self.otlp]
        if self.metrics:
            host, port = self.metrics
            argv += ["--metrics", f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
        return argv


def telemetry_options(func):
    """`--otlp`, `--metrics` and `--service-name`, as every recording command takes them."""
    options = [
        click.option("--otlp", metavar="URL", help="Send spans (and metrics) over OTLP/HTTP to URL as they are recorded, e.g. http://127.0.0.1:4318."),
        click.option("--metrics", metavar="HOST:PORT", help=f"Serve Prometheus metrics on http://HOST:PORT/metrics, e.g. {EXAMPLE_METRICS}."),
        click.option("--service-name", metavar="NAME", default=DEFAULT_SERVICE_NAME, show_default=True,
                     help="The service.name resource attribute of the spans and metrics."),
    ]
    for option in reversed(options):
        func = option(func)
    return func
