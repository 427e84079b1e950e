"""Load scenarios: YAML files checked key by key, with the line of every mistake.

A scenario names a target, a session mode, an era, a weighted mix of calls,
think time, users, spawn rate, duration and thresholds::

    target: http://127.0.0.1:8000/mcp      # stdio:CMD | http(s)://…/mcp | sse+http(s)://…/sse (or --target)
    session: long_lived                    # or session_per_task
    era: handshake                         # or 2026-07-28, or [handshake, 2026-07-28] to compare
    calls_per_session: 5                   # session_per_task: calls between handshake and close
    mix:
      - call: tools/call
        tool: echo
        arguments: {text: "{{string 64}}"}
        weight: 5
      - {call: tools/list}
    think_time: 0.1                        # seconds, or [min, max]
    users: 5
    spawn_rate: 5
    duration: 10s
    timeout: 10s                           # per call
    thresholds: ["p95 < 200ms", "fail_ratio < 0.01"]
    open_model: {rate: 200, max_lateness: 1s}   # constant arrival rate (optional)
    distinct_sources: true                 # loopback targets: each user binds its own 127.0.0.N
    sessions: 50                           # session_per_task: end after this many sessions, with a verdict
    calls: 40                              # long_lived: end after this many calls (duration is then the bound)
    server_requests:                       # how users answer server→client requests (default: refuse)
      roots/list: {roots: [{uri: "file:///tmp", name: tmp}]}
      sampling/createMessage: {role: assistant, content: {type: text, text: ok}, model: canned}
      elicitation/create: refuse
    input_responses:                       # the answers a user gives, by kind of request (2026-07-28's
      elicitation: {action: accept, content: {answer: "yes"}}   # input rounds; in the handshake era
      sampling: "the sampled text"         # its server requests): decline | cancel | {action, content};
      roots: ["file:///tmp"]               # a text or a CreateMessageResult; URIs or {uri, name}
      think_time: [0.5, 2]                 # seconds before each answer, or [min, max]
    max_rounds: 10                         # input rounds answered before input-rounds-exceeded
    listen: [toolsListChanged]             # 2026-07-28: each session holds a subscriptions/listen stream for
                                           # these types ({resourceSubscriptions: [URI, …]} too)
    reconnect: resume                      # or none | reinitialize, or a mapping: policy, attempts,
                                           # backoff, max_backoff, budget, budget_floor, idempotent: [echo]
    exit_code_on_error: 0                  # the exit status when a step failed (default 1, as Locust's
                                           # --exit-code-on-error); a fail_ratio threshold decides instead
    headers: ["X-Api-Key: $API_KEY"]       # sent on every request ($VAR, ${VAR}, @FILE as for --header)
    auth:                                  # bearer_token_env: VAR, or OAuth client credentials:
      oauth: {discover: true, client_id: load, client_secret_env: MCP_SECRET, scope: mcp, shared: false}
    proxy: http://proxy.example:3128       # else HTTPS_PROXY / HTTP_PROXY / NO_PROXY

A mix entry's `as_task: true` asks for a task (2025-11-25: `task` in the params; 2026-07-28: the
tasks extension declared, the server deciding); whatever comes, a step is the whole operation,
from its first request to its final result, its input rounds answered and its task polled.
A `tools/call` entry's `progress: true` asks for progress (a `progressToken` in `_meta`): the SDK then
answers on an SSE stream in 2026-07-28 too (without, one JSON body: no stream a proxy could cut).

Argument templates (a whole string value): `{{int A B}}` a random integer in
[A, B], `{{string N}}` a string of N bytes, `{{choice a b c}}` one of the words
(templates.py, which also compiles the mix into each call's params: `Workload`).

Nothing here imports locust or gevent: the CLI loads and checks scenarios in its
own process, and the locust processes rebuild them from `to_json()`.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# Argument templates and the compiled mix live in templates.py; their names are kept here too.
from mcpbench.auth.oauth import OAuthConfig
from mcpbench.auth.options import ClientOptions
from mcpbench.measures.durations import parse_duration
from mcpbench.load.templates import Workload, compile_arguments  # noqa: F401 (Workload re-exported)
from mcpbench.protocol.errors import McpbenchError
from mcpbench.protocol.listen import listen_filter
from mcpbench.protocol.operation import MAX_ROUNDS
from mcpbench.protocol.reconnect import ReconnectPolicy
from mcpbench.protocol.transports import LEGACY_SSE, STREAMABLE_HTTP
from mcpbench.protocol.versions import (
    INPUT_RESPONSES, LATEST_HANDSHAKE, REQUEST_STATE, VERSIONS, era_version, has_handshake, has_legacy_sse, has_method,
)
from mcpbench.system.target import parse_target
# A scenario's mistakes are ScenarioErrors, whether its YAML (yamlnodes.py) or its values are wrong.
from mcpbench.files.yamlnodes import ScenarioError, compose_yaml, node_mapping, node_value, node_where

SESSION_MODES = ("long_lived", "session_per_task")
# Methods a mix entry may call, with the key that names their target.
CALLS = {
    "tools/call": "tool",
    "tools/list": None,
    "resources/read": "uri",
    "resources/list": None,
    "prompts/get": "prompt",
    "prompts/list": None,
    "ping": None,
    "server/discover": None,
}
TOP_KEYS = (
    "name", "target", "session", "era", "calls_per_session", "mix", "mix_from_trace", "think_time",
    "users", "spawn_rate", "duration", "timeout", "thresholds", "open_model", "distinct_sources",
    "sessions", "server_requests", "reconnect", "exit_code_on_error", "headers", "auth", "proxy",
    "input_responses", "max_rounds", "listen", "calls",
)
AUTH_KEYS = ("oauth", "bearer_token_env")
MIX_KEYS = ("call", "tool", "uri", "prompt", "arguments", "weight", "as_task", "progress")
OPEN_KEYS = ("rate", "max_lateness")

# Defaults chosen for a short, bounded run on one machine.
DEFAULT_DURATION = 10.0
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_LATENESS = 1.0
# A run's duration is bounded: a scenario asking for more is a typo more often than a plan.
MAX_DURATION = 24 * 3600.0
# The exit status of a run whose steps failed, when no `fail_ratio` threshold judges them:
# Locust's own `--exit-code-on-error` default. Where failures are what is measured (the lab's
# experiments, `mcpbench run`), 0 says so.
EXIT_CODE_ON_ERROR = 1


@dataclass(frozen=True)
class MixCall:
    """One entry of the mix: a method, its target (tool, uri or prompt), arguments and weight."""

    method: str
    target: str | None = None
    arguments: Any = None
    weight: float = 1.0
    line: int | None = field(default=None, compare=False)  # where the scenario file defines it
    as_task: bool = False  # ask for a task (`as_task: true`)
    progress: bool = False  # ask for progress: a `progressToken` in each call's `_meta` (`progress: true`)

    @property
    def step(self) -> str:
        """The step name used in Locust's statistics (low cardinality, never an id)."""
        return f"{self.method} {self.target}" if self.method == "tools/call" and self.target else self.method

    def to_json(self) -> dict:
        return {"call": self.method, "target": self.target, "arguments": self.arguments, "weight": self.weight, "line": self.line,
                "as_task": self.as_task, "progress": self.progress}


@dataclass(frozen=True)
class Threshold:
    """`[STEP] METRIC OP VALUE`: metric is pNN, avg, max (ms), fail_ratio or rps."""

    text: str
    metric: str
    op: str
    value: float
    step: str | None = None

    def check(self, actual: float | None) -> bool:
        if actual is None or actual != actual:  # no data, or NaN
            return False
        return {"<": actual < self.value, "<=": actual <= self.value, ">": actual > self.value, ">=": actual >= self.value}[self.op]


@dataclass(frozen=True)
class OpenModel:
    rate: float  # intended call starts per second, over all processes
    max_lateness: float = DEFAULT_MAX_LATENESS  # a start later than this is dropped, not run


@dataclass(frozen=True)
class Scenario:
    target: str
    name: str = "scenario"
    session: str = "long_lived"
    versions: tuple[str, ...] = (LATEST_HANDSHAKE,)
    calls_per_session: int = 5
    mix: tuple[MixCall, ...] = (MixCall("tools/call", "echo", {"text": "hello"}),)
    think_time: tuple[float, float] = (0.0, 0.0)
    users: int = 1
    spawn_rate: float = 1.0
    duration: float = DEFAULT_DURATION
    timeout: float = DEFAULT_TIMEOUT
    thresholds: tuple[Threshold, ...] = ()
    open_model: OpenModel | None = None
    distinct_sources: bool = False  # each user connects from its own 127.0.0.N (source-affinity balancers)
    sessions: int | None = None  # session_per_task: how many sessions in all (per load process), then stop
    calls: int | None = None  # long_lived: how many calls in all (per load process), then stop
    server_requests: dict[str, dict | None] = field(default_factory=dict)  # method -> canned result, None: refuse
    reconnect: ReconnectPolicy | None = None  # None: no recovery inside a call (a long-lived user starts anew)
    exit_code_on_error: int = EXIT_CODE_ON_ERROR  # the exit status when a step failed (no fail_ratio threshold)
    client: ClientOptions = field(default_factory=ClientOptions)  # headers, credentials, proxy (as written)
    source: str = "<scenario>"
    ramp: dict | None = None  # `mcpbench capacity`'s steps (ramp.py's `Ramp.to_json()`): a load shape drives the rate
    replay: dict | None = None  # recorded sessions on their schedule (`load --speed`, traceload.py's `to_json`)
    input_responses: dict[str, dict] = field(default_factory=dict)  # request method -> the result a user answers with
    answer_think: tuple[float, float] = (0.0, 0.0)  # seconds a user thinks before each answer
    max_rounds: int = MAX_ROUNDS  # input rounds an operation answers
    listen: tuple[tuple[str, ...], tuple[str, ...]] | None = None  # (types, resource URIs) a session listens for

    @property
    def judges_failures(self) -> bool:
        """Whether a `fail_ratio` threshold of the whole run says how many failed steps pass."""
        return any(t.metric == "fail_ratio" and t.step is None for t in self.thresholds)

    def to_json(self) -> dict:
        return {
            "name": self.name, "target": self.target, "session": self.session, "versions": list(self.versions),
            "calls_per_session": self.calls_per_session, "mix": [c.to_json() for c in self.mix],
            "think_time": list(self.think_time), "users": self.users, "spawn_rate": self.spawn_rate,
            "duration": self.duration, "timeout": self.timeout, "thresholds": [t.text for t in self.thresholds],
            "open_model": None if self.open_model is None else {"rate": self.open_model.rate, "max_lateness": self.open_model.max_lateness},
            "distinct_sources": self.distinct_sources, "sessions": self.sessions, "calls": self.calls, "source": self.source,
            "server_requests": self.server_requests,
            "reconnect": None if self.reconnect is None else self.reconnect.to_json(),
            "exit_code_on_error": self.exit_code_on_error,
            "client": self.client.to_json(),
            "ramp": self.ramp,
            "replay": self.replay,
            "input_responses": self.input_responses,
            "answer_think": list(self.answer_think),
            "max_rounds": self.max_rounds,
            "listen": None if self.listen is None else [list(self.listen[0]), list(self.listen[1])],
        }

    @classmethod
    def from_json(cls, obj: dict) -> "Scenario":
        om = obj.get("open_model")
        return cls(
            target=obj["target"], name=obj["name"], session=obj["session"], versions=tuple(obj["versions"]),
            calls_per_session=obj["calls_per_session"],
            mix=tuple(MixCall(c["call"], c["target"], c["arguments"], c["weight"], c.get("line"), c.get("as_task", False),
                                c.get("progress", False)) for c in obj["mix"]),
            think_time=tuple(obj["think_time"]), users=obj["users"], spawn_rate=obj["spawn_rate"],
            duration=obj["duration"], timeout=obj["timeout"],
            thresholds=tuple(parse_threshold(t) for t in obj["thresholds"]),
            open_model=None if om is None else OpenModel(om["rate"], om["max_lateness"]),
            distinct_sources=obj.get("distinct_sources", False), sessions=obj.get("sessions"), calls=obj.get("calls"),
            server_requests=obj.get("server_requests") or {}, source=obj.get("source", "<json>"),
            reconnect=None if obj.get("reconnect") is None else ReconnectPolicy.from_mapping(obj["reconnect"]),
            exit_code_on_error=obj.get("exit_code_on_error", EXIT_CODE_ON_ERROR),
            client=ClientOptions.from_json(obj.get("client")),
            ramp=obj.get("ramp"),
            replay=obj.get("replay"),
            input_responses=obj.get("input_responses") or {},
            answer_think=tuple(obj.get("answer_think") or (0.0, 0.0)),
            max_rounds=obj.get("max_rounds", MAX_ROUNDS),
            listen=None if obj.get("listen") is None else (tuple(obj["listen"][0]), tuple(obj["listen"][1])),
        )

    def with_overrides(self, **changes: Any) -> "Scenario":
        changes = {k: v for k, v in changes.items() if v is not None}
        new = replace(self, **changes)
        check_consistency(new)
        return new


# --- small parsers ------------------------------------------------------------------------------

def parse_timeout(value: Any, what: str = "timeout") -> float:
    """A duration that bounds a wait: > 0 (a zero timeout fails every call before it is sent)."""
    seconds = parse_duration(value, what)
    if seconds == 0:
        raise ValueError(f"{what} must be > 0")
    return seconds


_THRESHOLD = re.compile(
    r"^\s*(?:(?P<step>.+?)\s+)?(?P<metric>p\d+(?:\.\d+)?|avg|max|fail_ratio|rps)\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>ms|s)?\s*$"
)


def parse_threshold(text: str) -> Threshold:
    """`p95 < 200ms`, `fail_ratio < 0.01`, `rps > 100`, `tools/call echo p99 < 50ms`."""
    match = _THRESHOLD.match(str(text))
    if not match:
        raise ValueError(
            f"threshold {text!r} not understood (expected like 'p95 < 200ms', 'avg < 50ms', 'fail_ratio < 0.01', 'rps > 100', optionally preceded by a step name)"
        )
    metric, unit, value = match["metric"], match["unit"], float(match["value"])
    if metric.startswith("p") and not 0 < float(metric[1:]) <= 100:
        raise ValueError(f"threshold {text!r}: percentile must be in (0, 100]")
    if metric in ("fail_ratio", "rps"):
        if unit:
            raise ValueError(f"threshold {text!r}: {metric} takes no unit")
    elif unit == "s":
        value *= 1000.0  # latencies are compared in ms
    return Threshold(str(text), metric, match["op"], value, match["step"])


def load_scenario(path: str | Path, *, target: str | None = None) -> Scenario:
    """Read and check a scenario file.

    `target`, the one given on the command line (`--target`), is the scenario's target when the
    file names none (one it names is overridden afterwards, with `Scenario.with_overrides`).

    Raises:
        ScenarioError: naming the file and line of the first problem.
    """
    return scenario_from_node(compose_yaml(path), str(path), target=target)


# Server→client requests a scenario can answer (the handshake era's `sampling`, `roots`, `elicitation`).
SERVER_REQUESTS = ("roots/list", "sampling/createMessage", "elicitation/create")
REFUSE = "refuse"


def server_requests(value: Any) -> dict[str, dict | None]:
    """`{method: result mapping | "refuse"}` -> `{method: result | None}`."""
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of {', '.join(SERVER_REQUESTS)} to a result or {REFUSE!r}")
    out: dict[str, dict | None] = {}
    for method, answer in value.items():
        if method not in SERVER_REQUESTS:
            raise ValueError(f"unknown server request {method!r} (known: {', '.join(SERVER_REQUESTS)})")
        if answer == REFUSE:
            out[method] = None
        elif isinstance(answer, dict):
            out[method] = answer
        else:
            raise ValueError(f"{method}: expected a result mapping or {REFUSE!r}, got {answer!r}")
    return out


# `input_responses:`: the kinds of input a user answers (each the request method it answers), and its think time.
INPUT_KINDS = {"elicitation": "elicitation/create", "sampling": "sampling/createMessage", "roots": "roots/list"}
INPUT_KEYS = (*INPUT_KINDS, "think_time")
ELICIT_ACTIONS = ("accept", "decline", "cancel")


def elicitation_answer(value: Any) -> dict:
    """`decline`, `cancel`, `accept`, or `{action: accept, content: {…}}` -> an ElicitResult."""
    if isinstance(value, str):
        if value not in ELICIT_ACTIONS:
            raise ValueError(f"{value!r} is no elicitation action ({', '.join(ELICIT_ACTIONS)})")
        return {"action": value, "content": {}} if value == "accept" else {"action": value}
    if not isinstance(value, dict) or value.get("action") not in ELICIT_ACTIONS or set(value) - {"action", "content"}:
        raise ValueError(f"expected {' | '.join(ELICIT_ACTIONS)} or a mapping {{action: accept, content: {{field: value}}}}")
    content = value.get("content")
    if content is not None and (value["action"] != "accept" or not isinstance(content, dict)):
        raise ValueError("content (a mapping of the form's fields) goes with action: accept only")
    return {"action": value["action"], "content": content or {}} if value["action"] == "accept" else {"action": value["action"]}


def sampling_answer(value: Any) -> dict:
    """A text, or a CreateMessageResult mapping (with `content`) -> a CreateMessageResult."""
    if isinstance(value, str):
        return {"role": "assistant", "content": {"type": "text", "text": value}, "model": "mcpbench", "stopReason": "endTurn"}
    if isinstance(value, dict) and isinstance(value.get("content"), (dict, list)):
        return {"role": "assistant", "model": "mcpbench", **value}
    raise ValueError("expected the sampled text, or a CreateMessageResult mapping with content")


def roots_answer(value: Any) -> dict:
    """A list of URIs or `{uri, name}` mappings -> a ListRootsResult."""
    if not isinstance(value, list):
        raise ValueError("expected a list of root URIs (or {uri, name} mappings)")
    roots = []
    for item in value:
        if isinstance(item, str) and item:
            roots.append({"uri": item})
        elif isinstance(item, dict) and isinstance(item.get("uri"), str) and set(item) <= {"uri", "name"}:
            roots.append(dict(item))
        else:
            raise ValueError(f"{item!r} is no root (a URI, or {{uri, name}})")
    return {"roots": roots}


INPUT_ANSWERS = {"elicitation": elicitation_answer, "sampling": sampling_answer, "roots": roots_answer}


def think_range(v: Any, what: str = "think_time") -> tuple[float, float]:
    """Seconds, or `[min, max]`."""
    if isinstance(v, list):
        if len(v) != 2:
            raise ValueError("give one number of seconds or [min, max]")
        low, high = parse_duration(v[0], what), parse_duration(v[1], what)
        if low > high:
            raise ValueError("[min, max] with min <= max")
        return (low, high)
    seconds = parse_duration(v, what)
    return (seconds, seconds)


def input_responses(node: Any, source: str) -> tuple[dict[str, dict], tuple[float, float]]:
    """`input_responses:` -> ({request method: the result answered}, think time), each mistake at its line."""
    keys = node_mapping(node, source, "input_responses", INPUT_KEYS)
    answers: dict[str, dict] = {}
    think = (0.0, 0.0)
    for key, (_, value_node) in keys.items():
        try:
            value = node_value(value_node)
            if key == "think_time":
                think = think_range(value, "input_responses think_time")
            else:
                answers[INPUT_KINDS[key]] = INPUT_ANSWERS[key](value)
        except (ValueError, TypeError) as exc:
            raise ScenarioError(f"{node_where(source, value_node)}: input_responses {key}: {exc}") from None
    return answers, think


def reconnect_policy(value: Any) -> ReconnectPolicy:
    """`resume` or `{policy: resume, attempts: 3, idempotent: [echo]}`."""
    if isinstance(value, str):
        return ReconnectPolicy.parse(value)
    if isinstance(value, dict):
        return ReconnectPolicy.from_mapping(value)
    raise ValueError("expected a policy name (none, reinitialize, resume) or a mapping")


def header_specs(value: Any) -> tuple[str, ...]:
    """`["Name: value", …]` or `{Name: value}` -> the specs `--header` takes (expanded at the run's start)."""
    if isinstance(value, dict):
        return tuple(f"{name}: {text}" for name, text in value.items())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise ValueError("expected a list of 'Name: value' or a mapping of names to values")


def auth_options(value: Any) -> tuple[str | None, OAuthConfig | None]:
    """`{bearer_token_env: VAR}` or `{oauth: {...}}` -> (the variable, the OAuth settings)."""
    if not isinstance(value, dict) or not value or set(value) - set(AUTH_KEYS) or len(value) > 1:
        raise ValueError(f"expected one of {', '.join(AUTH_KEYS)}: a mapping like {{oauth: {{discover: true, …}}}}")
    if "bearer_token_env" in value:
        if not isinstance(value["bearer_token_env"], str) or not value["bearer_token_env"]:
            raise ValueError("bearer_token_env: the name of an environment variable")
        return value["bearer_token_env"], None
    return None, OAuthConfig.from_mapping(value["oauth"])


def scenario_from_node(root: Any, source: str, *, target: str | None = None) -> Scenario:
    """A scenario from its YAML node; `target` stands in for a missing `target:` key (see `load_scenario`)."""
    if root is None:
        raise ScenarioError(f"{source}: empty scenario (a target and a mix are needed)")
    keys = node_mapping(root, source, "the scenario", TOP_KEYS)

    def value(key: str, convert: Callable[[Any], Any], default: Any = None) -> Any:
        if key not in keys:
            return default
        _, node = keys[key]
        try:
            return convert(node_value(node))
        except (ValueError, TypeError) as exc:
            raise ScenarioError(f"{node_where(source, node)}: {key}: {exc}") from None

    if "target" in keys:
        target = value("target", str)
        try:
            parse_target(target)
        except McpbenchError as exc:
            raise ScenarioError(f"{node_where(source, keys['target'][1])}: {exc}") from None
    elif target is None:
        raise ScenarioError(f"{source}: no 'target' (stdio:CMD, http(s)://HOST/mcp or sse+http(s)://HOST/sse)")

    def positive_int(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError("must be a whole number >= 1")
        return v

    def positive_number(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError("must be a number > 0")
        return float(v)

    def session(v: Any) -> str:
        if v not in SESSION_MODES:
            raise ValueError(f"{v!r} is not a session mode ({' or '.join(SESSION_MODES)})")
        return v

    def eras(v: Any) -> tuple[str, ...]:
        items = v if isinstance(v, list) else [v]
        out = []
        for item in items:
            item = str(item)
            version = era_version(item)
            if version is None:
                raise ValueError(f"unknown era {item!r} (handshake, 2026-07-28, or a handshake-era version like 2025-06-18)")
            out.append(version)
        if not out or len(set(out)) != len(out):
            raise ValueError("list each era once")
        return tuple(out)

    def duration(v: Any) -> float:
        seconds = parse_duration(v)
        if not 0 < seconds <= MAX_DURATION:
            raise ValueError(f"must be > 0 and at most {MAX_DURATION:g} s")
        return seconds

    def exit_status(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 255:
            raise ValueError("must be an exit status, a whole number from 0 to 255")
        return v

    def flag(v: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueError("must be true or false")
        return v

    def thresholds(v: Any) -> tuple[Threshold, ...]:
        return tuple(parse_threshold(t) for t in (v if isinstance(v, list) else [v]))

    mix: tuple[MixCall, ...] | None = None
    if "mix" in keys:
        mix = _mix(keys["mix"][1], source)
    if "mix_from_trace" in keys:
        if mix is not None:
            raise ScenarioError(f"{node_where(source, keys['mix_from_trace'][0])}: give either mix or mix_from_trace, not both")
        trace = Path(value("mix_from_trace", str))
        if not trace.is_absolute():
            trace = Path(source).parent / trace
        mix = mix_from_trace(trace)
    if mix is None:
        raise ScenarioError(f"{source}: no 'mix' (a list of calls, e.g. - call: tools/call, tool: echo)")

    answers, answer_think = input_responses(keys["input_responses"][1], source) if "input_responses" in keys else ({}, (0.0, 0.0))
    if "server_requests" in keys and (twice := sorted(set(answers) & set(value("server_requests", server_requests, {})))):
        raise ScenarioError(f"{node_where(source, keys['input_responses'][0])}: {twice[0]} is answered in both "
                            "server_requests and input_responses: give it once")

    open_model = None
    if "open_model" in keys:
        om = node_mapping(keys["open_model"][1], source, "open_model", OPEN_KEYS)
        if "rate" not in om:
            raise ScenarioError(f"{node_where(source, keys['open_model'][1])}: open_model needs a rate (calls per second)")
        try:
            rate = positive_number(node_value(om["rate"][1]))
        except ValueError as exc:
            raise ScenarioError(f"{node_where(source, om['rate'][1])}: rate {exc}") from None
        lateness = DEFAULT_MAX_LATENESS
        if "max_lateness" in om:
            try:
                lateness = parse_duration(node_value(om["max_lateness"][1]), "max_lateness")
            except ValueError as exc:
                raise ScenarioError(f"{node_where(source, om['max_lateness'][1])}: {exc}") from None
        open_model = OpenModel(rate, lateness)

    scenario = Scenario(
        target=target,
        name=value("name", str, Path(source).stem),
        session=value("session", session, "long_lived"),
        versions=value("era", eras, (LATEST_HANDSHAKE,)),
        calls_per_session=value("calls_per_session", positive_int, 5),
        mix=mix,
        think_time=value("think_time", think_range, (0.0, 0.0)),
        users=value("users", positive_int, 1),
        spawn_rate=value("spawn_rate", positive_number, 1.0),
        duration=value("duration", duration, DEFAULT_DURATION),
        timeout=value("timeout", parse_timeout, DEFAULT_TIMEOUT),
        thresholds=value("thresholds", thresholds, ()),
        open_model=open_model,
        distinct_sources=value("distinct_sources", flag, False),
        sessions=value("sessions", positive_int, None),
        calls=value("calls", positive_int, None),
        server_requests=value("server_requests", server_requests, {}),
        reconnect=value("reconnect", reconnect_policy, None),
        exit_code_on_error=value("exit_code_on_error", exit_status, EXIT_CODE_ON_ERROR),
        client=ClientOptions(value("headers", header_specs, ()), *value("auth", auth_options, (None, None)),
                             proxy=value("proxy", str, None), base=Path(source).parent),
        source=source,
        input_responses=answers,
        answer_think=answer_think,
        max_rounds=value("max_rounds", positive_int, MAX_ROUNDS),
        listen=value("listen", listen_filter, None),
    )
    try:
        check_consistency(scenario)
    except ScenarioError as exc:
        raise ScenarioError(f"{source}: {exc}") from None
    return scenario


def _mix(node: Any, source: str) -> tuple[MixCall, ...]:
    import yaml

    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise ScenarioError(f"{node_where(source, node)}: mix must be a non-empty list of calls")
    calls = []
    for item in node.value:
        keys = node_mapping(item, source, "a mix entry", MIX_KEYS)
        if "call" not in keys:
            raise ScenarioError(f"{node_where(source, item)}: a mix entry needs 'call' (one of {', '.join(CALLS)})")
        method = node_value(keys["call"][1])
        if method not in CALLS:
            hint = difflib.get_close_matches(str(method), CALLS, n=1)
            raise ScenarioError(
                f"{node_where(source, keys['call'][1])}: unknown call {method!r}"
                + (f" (did you mean {hint[0]!r}?)" if hint else f" (known: {', '.join(CALLS)})")
            )
        need = CALLS[method]
        for key in ("tool", "uri", "prompt"):
            if key in keys and key != need:
                raise ScenarioError(f"{node_where(source, keys[key][0])}: {method} takes no {key!r}")
        if need and need not in keys:
            raise ScenarioError(f"{node_where(source, item)}: {method} needs {need!r}")
        target = str(node_value(keys[need][1])) if need else None
        arguments = None
        if "arguments" in keys:
            if method not in ("tools/call", "prompts/get"):
                raise ScenarioError(f"{node_where(source, keys['arguments'][0])}: {method} takes no arguments")
            arguments = node_value(keys["arguments"][1])
            if not isinstance(arguments, dict):
                raise ScenarioError(f"{node_where(source, keys['arguments'][1])}: arguments must be a mapping")
            try:
                compile_arguments(arguments)
            except ValueError as exc:
                raise ScenarioError(f"{node_where(source, keys['arguments'][1])}: {exc}") from None
        weight = 1.0
        if "weight" in keys:
            weight = node_value(keys["weight"][1])
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
                raise ScenarioError(f"{node_where(source, keys['weight'][1])}: weight must be a number > 0")
        as_task, progress = (_call_flag(source, keys, key, method) for key in ("as_task", "progress"))
        calls.append(MixCall(method, target, arguments, float(weight), item.start_mark.line + 1, as_task, progress))
    return tuple(calls)


def check_consistency(scenario: Scenario) -> None:
    """Rules that tie keys together (also applied after command-line overrides).

    Raises:
        ScenarioError: without a line (the caller adds the file).
    """
    try:
        target = parse_target(scenario.target)
    except McpbenchError as exc:
        raise ScenarioError(str(exc)) from None
    if target.transport == LEGACY_SSE and (version := _lacking(scenario.versions, has_legacy_sse)):
        raise ScenarioError(f"era {version} has no legacy SSE transport (use an http(s):// target)")
    if scenario.distinct_sources and (target.transport not in (LEGACY_SSE, STREAMABLE_HTTP) or not _loopback(target.host)):
        raise ScenarioError("distinct_sources needs an HTTP target on loopback (127.x.x.x or localhost)")
    if scenario.sessions is not None and scenario.session != "session_per_task":
        raise ScenarioError("sessions counts whole sessions: it needs session: session_per_task")
    if scenario.calls is not None and (scenario.session != "long_lived" or scenario.open_model is not None):
        raise ScenarioError("calls counts a long-lived session's calls: it needs session: long_lived, no open_model")
    if scenario.open_model is not None and scenario.session != "long_lived":
        raise ScenarioError("open_model schedules single calls: it needs session: long_lived")
    if scenario.replay is not None and (scenario.open_model is not None or scenario.session != "session_per_task"):
        raise ScenarioError("a recorded schedule (--speed) runs whole sessions: no open_model, session: session_per_task")
    if scenario.listen is not None and not _lacking(scenario.versions, has_handshake):
        raise ScenarioError("listen holds a subscriptions/listen stream: it needs era 2026-07-28")
    if scenario.ramp is not None and scenario.open_model is None:
        raise ScenarioError("a ramp sets the rate of an open model: it needs open_model")
    # stdio with session_per_task is allowed: each task starts a fresh process (the process is the session).
    if any(call.method == "ping" for call in scenario.mix) and (
        version := _lacking(scenario.versions, lambda v: has_method(v, "ping"))
    ):
        raise ScenarioError(f"ping does not exist in {version}")


def _call_flag(source: str, keys: dict, key: str, method: str) -> bool:
    """A mix entry's `as_task:` or `progress:`: true or false, and only on a tools/call."""
    if key not in keys:
        return False
    flag = node_value(keys[key][1])
    if not isinstance(flag, bool):
        raise ScenarioError(f"{node_where(source, keys[key][1])}: {key} must be true or false")
    if flag and method != "tools/call":
        raise ScenarioError(f"{node_where(source, keys[key][0])}: only tools/call " + ("runs as a task" if key == "as_task" else "asks for progress"))
    return flag


def _lacking(versions: tuple[str, ...], has: Callable[[str], bool]) -> str | None:
    """The first of `versions` without what `has` asks about."""
    return next((version for version in versions if not has(version)), None)


def _loopback(host: str | None) -> bool:
    return host == "localhost" or (host or "").startswith("127.")


# --- the mix, derived from a recording ----------------------------------------------------------

_TRACE_METHODS = {m for m in CALLS if m not in ("ping", "server/discover")} | {"ping"}


def mix_from_trace(path: str | Path) -> tuple[MixCall, ...]:
    """The client→server requests of a trace as a weighted mix (weight = how often each was seen).

    Raises:
        TraceError: the trace cannot be read.
        ScenarioError: the trace holds no request a load run can repeat.
    """
    import orjson

    counts: dict[bytes, int] = {}
    calls: dict[bytes, MixCall] = {}
    for msg in _client_requests(path):
        if msg.get("method") not in _TRACE_METHODS or not isinstance(msg.get("params") or {}, dict):
            continue
        method = msg["method"]
        params = dict(msg.get("params") or {})
        params.pop("_meta", None)
        if INPUT_RESPONSES in params or REQUEST_STATE in params:
            continue  # a later round of a 2026-07-28 operation: its step runs all its rounds, counted once
        key_name = CALLS[method]
        target = None
        if key_name:
            target = params.get("name" if key_name in ("tool", "prompt") else "uri")
            if not isinstance(target, str):
                continue
        arguments = params.get("arguments") if method in ("tools/call", "prompts/get") else None
        if arguments is not None and not isinstance(arguments, dict):
            continue  # not a call a server could take: nothing to repeat
        key = orjson.dumps([method, target, arguments], option=orjson.OPT_SORT_KEYS)
        counts[key] = counts.get(key, 0) + 1
        calls.setdefault(key, MixCall(method, target, arguments))
    if not calls:
        raise ScenarioError(f"{path}: no client request in this trace can be replayed as load (tools/call, resources/read, prompts/get, …)")
    return tuple(replace(calls[k], weight=float(counts[k])) for k in calls)


def versions_from_trace(path: str | Path) -> tuple[str, ...]:
    """The protocol versions the trace's sessions settled on, in order of first use: the version
    `initialize` settled, or that of a 2026-07-28 session a request of which got its result. A
    `server/discover` probe that failed settles nothing: its client fell back to a handshake."""
    from mcpbench.protocol import jsonrpc
    from mcpbench.protocol.jsonrpc import Response
    from mcpbench.protocol.session import Direction, Exchange, Session
    from mcpbench.trace.reader import read_trace

    sessions: dict[Any, Session] = {}
    seen: dict[str, None] = {}
    for event in read_trace(path):
        if event.get("kind") != "message" or event.get("dir") not in ("c2s", "s2c"):
            continue
        try:
            message = jsonrpc.from_obj(event.get("msg"))
        except jsonrpc.InvalidMessage:
            continue
        session = sessions.setdefault(event.get("session"), Session())
        for found in session.observe(Direction(event["dir"]), message):
            if type(found) is Exchange and type(found.answer) is Response and session.version in VERSIONS:
                seen.setdefault(session.version)
    return tuple(seen)


def _client_requests(path: str | Path) -> Iterator[dict]:
    """The client→server requests of a trace, as JSON-RPC objects."""
    from mcpbench.trace.reader import read_trace

    for event in read_trace(path):
        if event.get("kind") != "message" or event.get("dir") != "c2s":
            continue
        msg = event.get("msg")
        if isinstance(msg, dict) and "id" in msg and isinstance(msg.get("method"), str):
            yield msg

