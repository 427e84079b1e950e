"""The contract-drift gate: a server's declared surface, before and after, each change classed.

The surface is what a server declares: its capabilities (`initialize` or `server/discover`) and
the listings of `tools/list`, `resources/list`, `resources/templates/list` and `prompts/list`
(pages joined), with every tool's input and output schema. `diff --contract` compares two traces'
surfaces, `replay --contract` a recording's with the live server's answers to the same requests.

Each change is *breaking* (a client that worked may not) or *compatible*:

- breaking: a tool, resource, template or prompt removed; a capability (or a flag of one)
  withdrawn; a required argument added, an optional one made required, an argument removed; an
  argument's type or values narrowed (the server accepts less: `number` → `integer`, fewer enum
  values, a tighter bound, a changed pattern); an output schema narrowed in what it promises
  (a property removed or no longer required, a type or value set the old one did not allow, the
  schema removed); a resource's MIME type changed;
- compatible: anything added (tools, optional arguments, capabilities, output properties), a
  requirement dropped, a type widened, descriptions, titles and annotations.

A listing one side does not have is not compared, and that is said (a note), not failed.
Pure: no I/O.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mcpbench.ci.cases import ERROR, FAILED, PASSED, SKIPPED, Case, Suite
from mcpbench.protocol.errors import EXIT_ENVIRONMENT
from mcpbench.protocol.jsonrpc import Notification, Request, Response
from mcpbench.protocol.versions import DISCOVER

BREAKING, COMPATIBLE = "breaking", "compatible"
FAIL_ON = (BREAKING, "any")  # also spelled in replay/cli.py's choices

INITIALIZE = "initialize"
# listing method -> (the result's list, the key an item is known by, what an item is called)
LISTINGS = {
    "tools/list": ("tools", "name", "tool"),
    "resources/list": ("resources", "uri", "resource"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate", "resource template"),
    "prompts/list": ("prompts", "name", "prompt"),
}
SURFACE_METHODS = frozenset({INITIALIZE, DISCOVER, *LISTINGS})
INITIALIZED = "notifications/initialized"

# Bounds of a JSON Schema: raising a lower one or lowering an upper one narrows what is allowed.
LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
# Schema keywords that only describe.
WORDS = ("description", "title", "examples", "default", "$comment", "deprecated")
# Schema keywords read by the comparison itself.
READ = frozenset({"type", "enum", "properties", "required", "items", "additionalProperties", *LOWER_BOUNDS,
                  *UPPER_BOUNDS, *WORDS})


@dataclass(frozen=True, slots=True)
class ContractChange:
    """One difference of the declared surface: `where` (`tool echo`), `what` happened, and its class."""

    severity: str
    where: str
    what: str
    old: Any = None
    new: Any = None

    def line(self) -> str:
        return f"{self.severity:<10} {self.where}: {self.what}"

    def to_json(self) -> dict[str, Any]:
        return {"class": self.severity, "where": self.where, "what": self.what, "old": self.old, "new": self.new}


@dataclass(slots=True)
class Surface:
    """A server's declared surface; a listing absent from `listings` was not seen (not compared)."""

    capabilities: dict | None = None
    listings: dict[str, dict[str, dict]] = field(default_factory=dict)  # method -> key -> item
    notes: list[str] = field(default_factory=list)
    _done: set[str] = field(default_factory=set)  # listings read to their last page

    def take(self, method: str, params: Any, answer: Any, *, side: str) -> None:
        """Learn from one answered request (a `Response`, an `ErrorResponse`, or None: no answer)."""
        if method in (INITIALIZE, DISCOVER):
            if self.capabilities is None and isinstance(answer, Response) and isinstance(answer.result, dict):
                capabilities = answer.result.get("capabilities")
                self.capabilities = capabilities if isinstance(capabilities, dict) else {}
            return
        if method not in LISTINGS or method in self._done:
            return
        key_list, key, _ = LISTINGS[method]
        if answer is None:
            self.notes.append(f"{side} has no answer to {method}")
            return
        self._done.add(method)  # a page without nextCursor ends it (set again below when more follow)
        items = self.listings.setdefault(method, {})
        if not isinstance(answer, Response) or not isinstance(answer.result, dict):
            self.notes.append(f"{side} answered {method} with an error: {getattr(answer, 'message', answer)}")
            return
        for item in answer.result.get(key_list) or ():
            if isinstance(item, dict) and isinstance(item.get(key), str):
                items.setdefault(item[key], item)
        if answer.result.get("nextCursor"):
            self._done.discard(method)


def surface(calls: Iterable[tuple[str, Any, Any]], side: str) -> Surface:
    """The surface `(method, params, answer)` triples declare, in the order they were answered."""
    found = Surface()
    for method, params, answer in calls:
        found.take(method, params, answer, side=side)
    return found


def recorded_calls(trace: Any) -> Iterable[tuple[str, Any, Any]]:
    """A `TracePlan`'s requests with their recorded answers."""
    for session in trace.sessions:
        for call in session.calls:
            yield call.method, call.request.params, call.answer


def live_calls(run: Any) -> Iterable[tuple[str, Any, Any]]:
    """A `ReplayRun`'s recorded requests with their live answers."""
    for session in run.sessions:
        for live in session.calls:
            if live.sent is not None:
                yield live.call.method, live.call.request.params, live.answer


def surface_plan(trace: Any) -> Any:
    """`trace` with only what reads the surface: the handshake and the listings (no tool is called)."""
    from dataclasses import replace

    def keep(step: Any) -> bool:
        message = step.message
        if isinstance(message, Request):
            return message.method in SURFACE_METHODS
        return isinstance(message, Notification) and message.method == INITIALIZED

    def reduced(session: Any) -> Any:
        steps = [step for step in session.steps if keep(step)]
        # The answers the dropped steps waited for are waited for at the end instead.
        asked = tuple(step.call.index for step in steps if step.call is not None)
        return replace(session, steps=steps, final_wait=asked, listens=False)

    return replace(trace, sessions=[reduced(session) for session in trace.sessions])


# ---- comparing ----------------------------------------------------------------------------------


def compare_surfaces(old: Surface, new: Surface, *, old_name: str = "the recording", new_name: str = "the live server") -> tuple[list[ContractChange], list[str]]:
    """Every change from `old` to `new`, and notes on what could not be compared."""
    changes: list[ContractChange] = []
    notes = [*old.notes, *new.notes]
    if old.capabilities is None or new.capabilities is None:
        side = old_name if old.capabilities is None else new_name
        notes.append(f"{side} has no initialize or server/discover answer: capabilities not compared")
    else:
        _capabilities(old.capabilities, new.capabilities, "", changes)
    for method, (_, _, noun) in LISTINGS.items():
        before, after = old.listings.get(method), new.listings.get(method)
        if before is None or after is None:
            notes.append(f"{old_name if before is None else new_name} has no {method}: {noun}s not compared")
            continue
        for name in before.keys() - after.keys():
            changes.append(ContractChange(BREAKING, f"{noun} {name}", "removed", old=before[name]))
        for name in after.keys() - before.keys():
            changes.append(ContractChange(COMPATIBLE, f"{noun} {name}", "added", new=after[name]))
        for name in before.keys() & after.keys():
            ITEMS[method](f"{noun} {name}", before[name], after[name], changes)
    changes.sort(key=lambda change: (change.severity != BREAKING, change.where))
    return changes, notes


def _capabilities(old: Any, new: Any, path: str, out: list[ContractChange]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            sub = f"{path}.{key}" if path else key
            if key not in new:
                out.append(ContractChange(BREAKING, "capabilities", f"{sub} withdrawn", old=old[key]))
            else:
                _capabilities(old[key], new[key], sub, out)
        for key in new.keys() - old.keys():
            out.append(ContractChange(COMPATIBLE, "capabilities", f"{path + '.' if path else ''}{key} added", new=new[key]))
    elif old != new:
        withdrawn = bool(old) and not new
        out.append(ContractChange(BREAKING if withdrawn else COMPATIBLE, "capabilities",
                                  f"{path} {'withdrawn' if withdrawn else 'changed'}", old=old, new=new))


def _tool(where: str, old: dict, new: dict, out: list[ContractChange]) -> None:
    _schema(where, "argument", old.get("inputSchema"), new.get("inputSchema"), "", out, accepts=True)
    before, after = old.get("outputSchema"), new.get("outputSchema")
    if before is not None and after is None:
        out.append(ContractChange(BREAKING, where, "output schema removed", old=before))
    elif before is None and after is not None:
        out.append(ContractChange(COMPATIBLE, where, "output schema added", new=after))
    elif before is not None:
        _schema(where, "output", before, after, "", out, accepts=False)
    _others(where, old, new, {"name", "inputSchema", "outputSchema"}, out)


def _resource(where: str, old: dict, new: dict, out: list[ContractChange]) -> None:
    if old.get("mimeType") != new.get("mimeType"):
        out.append(ContractChange(BREAKING, where, "MIME type changed", old=old.get("mimeType"), new=new.get("mimeType")))
    _others(where, old, new, {"uri", "uriTemplate", "mimeType"}, out)


def _prompt(where: str, old: dict, new: dict, out: list[ContractChange]) -> None:
    before = {a.get("name"): a for a in old.get("arguments") or () if isinstance(a, dict)}
    after = {a.get("name"): a for a in new.get("arguments") or () if isinstance(a, dict)}
    for name in before.keys() - after.keys():
        out.append(ContractChange(BREAKING, where, f"argument {name!r} removed", old=before[name]))
    for name in after.keys() - before.keys():
        required = bool(after[name].get("required"))
        out.append(ContractChange(BREAKING if required else COMPATIBLE, where,
                                  f"argument {name!r} added ({'required' if required else 'optional'})", new=after[name]))
    for name in before.keys() & after.keys():
        was, now = bool(before[name].get("required")), bool(after[name].get("required"))
        if was != now:
            out.append(ContractChange(BREAKING if now else COMPATIBLE, where,
                                      f"argument {name!r} {'now required' if now else 'now optional'}", old=was, new=now))
        elif before[name] != after[name]:
            out.append(ContractChange(COMPATIBLE, where, f"argument {name!r}: description changed"))
    _others(where, old, new, {"name", "arguments"}, out)


ITEMS = {"tools/list": _tool, "resources/list": _resource, "resources/templates/list": _resource, "prompts/list": _prompt}


def _others(where: str, old: dict, new: dict, done: set[str], out: list[ContractChange]) -> None:
    """Descriptions, titles, annotations, icons: compatible changes, named."""
    for key in sorted((old.keys() | new.keys()) - done):
        if old.get(key) != new.get(key):
            out.append(ContractChange(COMPATIBLE, where, f"{key} changed", old=old.get(key), new=new.get(key)))


def _types(schema: dict) -> frozenset[str] | None:
    """The JSON types a schema allows; None: any."""
    kind = schema.get("type")
    if kind is None:
        return None
    return frozenset([kind] if isinstance(kind, str) else kind)


def _within(inner: frozenset[str] | None, outer: frozenset[str] | None) -> bool:
    """Whether every type `inner` allows, `outer` allows too (`number` takes in `integer`)."""
    if outer is None:
        return True
    if inner is None:
        return False
    return all(kind in outer or (kind == "integer" and "number" in outer) for kind in inner)


def _schema(where: str, noun: str, old: Any, new: Any, path: str, out: list[ContractChange], *, accepts: bool) -> None:
    """Changes of one (sub)schema. `accepts`: an input (the server must accept all it did); else an
    output (it must promise all it did). `path` names the property (`a.b`, `a[]` for items)."""
    label = f"{noun} {path!r}" if path else ("input schema" if accepts else "output schema")
    if not isinstance(old, dict) or not isinstance(new, dict):
        if old != new:
            out.append(ContractChange(BREAKING, where, f"{label} changed", old=old, new=new))
        return

    def change(narrower: bool, what: str, before: Any = None, after: Any = None) -> None:
        # An input that accepts less breaks its callers; an output that promises more (or less) breaks its readers.
        out.append(ContractChange(BREAKING if narrower == accepts else COMPATIBLE, where, what, old=before, new=after))

    types_old, types_new = _types(old), _types(new)
    if types_old != types_new:
        narrowed = not _within(types_old, types_new)
        change(narrowed, f"{label}: type {_shown(types_old)} → {_shown(types_new)}", old.get("type"), new.get("type"))
    enum_old, enum_new = old.get("enum"), new.get("enum")
    if enum_old != enum_new:
        narrowed = enum_new is not None and (enum_old is None or any(value not in enum_new for value in enum_old))
        change(narrowed, f"{label}: allowed values {_shown_values(enum_old)} → {_shown_values(enum_new)}", enum_old, enum_new)
    properties_old, properties_new = old.get("properties") or {}, new.get("properties") or {}
    required_old, required_new = set(old.get("required") or ()), set(new.get("required") or ())
    prefix = f"{path}." if path else ""
    for name in properties_old.keys() - properties_new.keys():
        out.append(ContractChange(BREAKING, where, f"{noun} {prefix + name!r} removed", old=properties_old[name]))
    for name in properties_new.keys() - properties_old.keys():
        required = name in required_new
        severity = BREAKING if accepts and required else COMPATIBLE
        out.append(ContractChange(severity, where, f"{noun} {prefix + name!r} added ({'required' if required else 'optional'})",
                                  new=properties_new[name]))
    for name in sorted(properties_old.keys() & properties_new.keys()):
        if name in required_new and name not in required_old:
            change(True, f"{noun} {prefix + name!r} now required")
        elif name in required_old and name not in required_new:
            change(False, f"{noun} {prefix + name!r} {'now optional' if accepts else 'no longer required'}")
        _schema(where, noun, properties_old[name], properties_new[name], prefix + name, out, accepts=accepts)
    if "items" in old or "items" in new:
        _schema(where, noun, old.get("items", {}), new.get("items", {}), f"{path}[]", out, accepts=accepts)
    for key in LOWER_BOUNDS + UPPER_BOUNDS:
        before, after = old.get(key), new.get(key)
        if before != after:
            lower = key in LOWER_BOUNDS
            tighter = after is not None and (before is None or (after > before if lower else after < before))
            change(tighter, f"{label}: {key} {before} → {after}", before, after)
    closed_old, closed_new = old.get("additionalProperties") is False, new.get("additionalProperties") is False
    if closed_old != closed_new:
        change(closed_new, f"{label}: {'no' if closed_new else 'any'} other properties allowed")
    for key in WORDS:
        if old.get(key) != new.get(key):
            out.append(ContractChange(COMPATIBLE, where, f"{label}: {key} changed", old=old.get(key), new=new.get(key)))
    for key in sorted((old.keys() | new.keys()) - READ):
        if old.get(key) != new.get(key):  # a pattern, a format, a $ref, anyOf: nothing says it accepts as much
            out.append(ContractChange(BREAKING, where, f"{label}: {key} changed", old=old.get(key), new=new.get(key)))


def _shown(types: frozenset[str] | None) -> str:
    return "any" if types is None else "|".join(sorted(types))


def _shown_values(values: Any) -> str:
    return "any" if values is None else "[" + ", ".join(map(repr, values)) + "]"


# ---- the report ---------------------------------------------------------------------------------


@dataclass(slots=True)
class ContractReport:
    kind: str  # "replay" or "diff"
    source: str
    target: str
    changes: list[ContractChange]
    notes: list[str]
    aborted: str | None = None

    def breaking(self) -> list[ContractChange]:
        return [change for change in self.changes if change.severity == BREAKING]

    def exit_code(self, fail_on: str = BREAKING) -> int:
        if self.aborted:
            return EXIT_ENVIRONMENT
        failing = self.changes if fail_on == "any" else self.breaking()
        return 1 if failing else 0

    def to_json(self, fail_on: str = BREAKING) -> dict[str, Any]:
        return {"kind": f"{self.kind}-contract", "trace": self.source, "target": self.target, "fail_on": fail_on,
                "exit_code": self.exit_code(fail_on), "aborted": self.aborted,
                "counts": {BREAKING: len(self.breaking()), COMPATIBLE: len(self.changes) - len(self.breaking())},
                "changes": [change.to_json() for change in self.changes], "notes": self.notes}

    def render(self) -> str:
        arrow = "→" if self.kind == "replay" else "vs"
        breaking = len(self.breaking())
        lines = [f"mcpbench contract {self.source} {arrow} {self.target}: {breaking} breaking, "
                 f"{len(self.changes) - breaking} compatible change(s)"]
        lines += [f"  {change.line()}" for change in self.changes]
        lines += [f"  note: {note}" for note in self.notes]
        if self.aborted:
            lines.append(f"  aborted: {self.aborted}")
        return "\n".join(lines)

    def suite(self, fail_on: str = BREAKING) -> Suite:
        """A test case per change (a failure when it fails the gate), a skipped one per note."""
        suite = Suite(self.source, stats={BREAKING: len(self.breaking()), COMPATIBLE: len(self.changes) - len(self.breaking()),
                                          "notes": len(self.notes)})
        for change in self.changes:
            fails = change.severity == BREAKING or fail_on == "any"
            suite.cases.append(Case(f"{change.where}: {change.what}", "mcpbench.contract",
                                    FAILED if fails else PASSED, message=f"{change.severity}: {change.what}",
                                    detail=change.line()))
        suite.cases += [Case(note, "mcpbench.contract", SKIPPED, message=note) for note in self.notes]
        if not self.changes:
            suite.cases.append(Case("declared surface unchanged", "mcpbench.contract", PASSED))
        if self.aborted:
            suite.cases.append(Case("replay", "mcpbench.contract", ERROR, message=self.aborted))
        return suite


@dataclass(slots=True)
class ContractResult:
    """The contract gate's one verdict over its traces' reports, as `fail_on` says (`FAIL_ON`).

    Exit status: 3 when a replay broke off, else 1 when a report's changes fail the gate, else 0.
    """

    reports: list[ContractReport]
    fail_on: str = BREAKING

    @property
    def aborted(self) -> ContractReport | None:
        return next((report for report in self.reports if report.aborted), None)

    @property
    def exit_code(self) -> int:
        return max(report.exit_code(self.fail_on) for report in self.reports)

    def to_json(self) -> dict[str, Any]:
        """One trace's report as it is; several, a suite of them with the one exit status."""
        body = [report.to_json(self.fail_on) for report in self.reports]
        return body[0] if len(body) == 1 else {"kind": "contract-suite", "exit_code": self.exit_code, "traces": body}

    def suites(self) -> list[Suite]:
        return [report.suite(self.fail_on) for report in self.reports]


def diff_contract(a: Any, b: Any) -> ContractReport:
    """Two traces' declared surfaces compared (`TracePlan`s)."""
    changes, notes = compare_surfaces(surface(recorded_calls(a), "trace A"), surface(recorded_calls(b), "trace B"),
                                      old_name="trace A", new_name="trace B")
    return ContractReport("diff", a.path, b.path, changes, notes)


def replay_contract(trace: Any, run: Any) -> ContractReport:
    """A recording's declared surface against what the live server declared in its replay (`ReplayRun`)."""
    changes, notes = compare_surfaces(surface(recorded_calls(trace), "the recording"),
                                      surface(live_calls(run), "the live server"))
    return ContractReport("replay", trace.path, run.target, changes, notes, run.aborted)
