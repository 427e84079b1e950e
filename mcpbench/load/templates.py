"""Argument templates of load scenarios, and the mix compiled into what each call sends.

A whole string value of a call's `arguments` may be a template: `{{int A B}}` a random integer in
[A, B], `{{string N}}` a string of N bytes, `{{choice a b c}}` one of the words. `compile_arguments`
turns arguments into a function of a `random.Random` (constant parts are shared, not copied), which
`scenario.py` uses to check a scenario and `Workload` to make each call's params in the users.

Nothing here imports locust or gevent.
"""

from __future__ import annotations

import itertools
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpbench.load.scenario import MixCall

# `{{string N}}` above 64 MiB would exhaust the load generator before the server.
MAX_TEMPLATE_STRING = 64 * 1024 * 1024


_TEMPLATE = re.compile(r"^\{\{\s*(\w+)((?:\s+\S+)*)\s*\}\}$")
_ALPHABET = string.ascii_letters + string.digits


def _template(text: str) -> Callable[[random.Random], Any] | None:
    """A generator for a `{{…}}` template string, None for a plain string.

    Raises:
        ValueError: an unknown template or bad arguments.
    """
    match = _TEMPLATE.match(text)
    if not match:
        if "{{" in text and "}}" in text:
            raise ValueError(f"template {text!r} must be the whole value, like '{{{{int 1 100}}}}'")
        return None
    kind, args = match.group(1), match.group(2).split()
    if kind == "int":
        if len(args) != 2 or not all(re.fullmatch(r"-?\d+", a) for a in args) or int(args[0]) > int(args[1]):
            raise ValueError(f"template {text!r}: expected {{{{int LOW HIGH}}}} with LOW <= HIGH")
        low, high = int(args[0]), int(args[1])
        return lambda rng: rng.randint(low, high)
    if kind == "string":
        if len(args) != 1 or not args[0].isdigit() or int(args[0]) > MAX_TEMPLATE_STRING:
            raise ValueError(f"template {text!r}: expected {{{{string N}}}} with 0 <= N <= {MAX_TEMPLATE_STRING}")
        size = int(args[0])
        # Random bytes per call would cost more than the call; a random slice of a fixed pool is as
        # good against caches and costs one slice.
        pool = "".join(random.Random(size).choice(_ALPHABET) for _ in range(4096)) * (size // 4096 + 2)

        def make(rng: random.Random) -> str:
            start = rng.randrange(4096)
            return pool[start : start + size]

        return make
    if kind == "choice":
        if not args:
            raise ValueError(f"template {text!r}: expected {{{{choice A B …}}}}")
        return lambda rng: rng.choice(args)
    raise ValueError(f"unknown template {{{{{kind} …}}}} in {text!r} (known: int, string, choice)")


def compile_arguments(value: Any) -> Callable[[random.Random], Any]:
    """A function returning fresh arguments for one call; constant values are shared, not copied.

    Raises:
        ValueError: a template is malformed.
    """
    if isinstance(value, str):
        gen = _template(value)
        return gen if gen is not None else (lambda rng: value)
    if isinstance(value, dict):
        parts = {k: compile_arguments(v) for k, v in value.items()}
        if all(_is_constant(value[k]) for k in value):
            return lambda rng: value
        return lambda rng: {k: f(rng) for k, f in parts.items()}
    if isinstance(value, list):
        parts_l = [compile_arguments(v) for v in value]
        if all(_is_constant(v) for v in value):
            return lambda rng: value
        return lambda rng: [f(rng) for f in parts_l]
    return lambda rng: value


def _is_constant(value: Any) -> bool:
    if isinstance(value, str):
        return _TEMPLATE.match(value) is None
    if isinstance(value, dict):
        return all(_is_constant(v) for v in value.values())
    if isinstance(value, list):
        return all(_is_constant(v) for v in value)
    return True




@dataclass
class Workload:
    """The mix, compiled: `next()` returns (call, params) ready for the client."""

    calls: tuple[MixCall, ...]
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self._makers = [self._maker(c) for c in self.calls]
        self._weights = [c.weight for c in self.calls]
        total, acc = sum(self._weights), 0.0
        self._cum = []
        for w in self._weights:
            acc += w / total
            self._cum.append(acc)

    @staticmethod
    def _maker(call: MixCall) -> Callable[[random.Random], dict | None]:
        if call.method == "tools/call":
            args = compile_arguments(call.arguments or {})
            name = call.target
            if call.progress:  # a token of its own for each call (a token must be unique among the requests in flight)
                tokens = itertools.count(1)
                return lambda rng: {"name": name, "arguments": args(rng), "_meta": {"progressToken": f"p{next(tokens)}"}}
            return lambda rng: {"name": name, "arguments": args(rng)}
        if call.method == "prompts/get":
            args = compile_arguments(call.arguments or {})
            name = call.target
            return lambda rng: {"name": name, "arguments": args(rng)} if call.arguments else {"name": name}
        if call.method == "resources/read":
            params = {"uri": call.target}
            return lambda rng: params
        return lambda rng: None

    def next(self) -> tuple[MixCall, dict | None]:
        if len(self.calls) == 1:
            index = 0
        else:
            x = self.rng.random()
            index = next((i for i, c in enumerate(self._cum) if x < c), len(self._cum) - 1)
        return self.calls[index], self._makers[index](self.rng)
