"""`serve-trace`'s tasks: a recorded task served as a live one, with no I/O.

A recorded call that became a task (2025-11-25's `CreateTaskResult`, the 2026-07-28 extension's
`resultType: "task"` handle) is served as a task of the mock's own: a new id (the recorded one is
another server's, and two clients of the mock must not share one task), its recorded status
sequence one poll at a time (`tasks/get`: the recorded polls' answers in order, the last one
repeated), its recorded end fetched with 2025-11-25's `tasks/result` (which ends the task at once:
the mock has no work to wait for), and a `tasks/cancel` honoured whatever the recording did: a
task not yet ended is cancelled (its polls say so from then on, `tasks/result` refuses it), one that
ended is refused with -32602 as the spec asks. Every recorded task id in what is served is the
mock's id. `tasks/list` lists the mock's tasks as they stand.

A 2026-07-28 task that asked for input mid-task (a poll `input_required` with `inputRequests`, then
the recording's `tasks/update`) waits for it: its polls repeat the one that asked until a
`tasks/update` comes, which is accepted when its `inputResponses` keys are among those the recorded
update answered (the recorded answer to it served, the polls going on from there), and refused with
-32602 naming what is wrong when the task asks for nothing now or a key was never asked.

A `tasks/get` naming a task the recording has but the mock never created (a client reading the
trace's ids) is left to the recorded answers; an id neither knows is refused with -32602 naming it.
Per poll, not per recorded time: a client that polls as the recorded one did sees what it saw.
"""

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from mcpbench.protocol.jsonrpc import INVALID_PARAMS
from mcpbench.protocol.operation import task_handle
from mcpbench.protocol.versions import INPUT_REQUESTS, INPUT_RESPONSES, RESULT_TYPE, TERMINAL_TASK_STATUSES
from mcpbench.replay.plan import TracePlan, answer_obj

# The methods served from a task's script.
SERVED = frozenset({"tasks/get", "tasks/result", "tasks/cancel", "tasks/list", "tasks/update"})
# Tasks the mock keeps at once (the oldest forgotten first): a long-running mock must not grow without bound.
MAX_TASKS = 10_000
# The fields of a task a listing or a synthesized answer carries (not a poll's `result` or `resultType`).
TASK_FIELDS = ("taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttl", "ttlSeconds", "pollInterval",
               "pollIntervalMilliseconds")


@dataclass(slots=True)
class Update:
    """A recorded `tasks/update`: after how many recorded polls it came, the keys it answered, its answer."""

    after: int
    keys: frozenset[str]
    answer: dict


@dataclass(slots=True)
class TaskScript:
    """What the recording says of one task: its handle, its polls' answers, its end and its cancel."""

    handle: dict
    polls: list[dict] = field(default_factory=list)  # answer objects ({"result"} / {"error"}) in order
    result: dict | None = None  # 2025-11-25's tasks/result answer
    cancel: dict | None = None  # a tasks/cancel answer
    updates: list[Update] = field(default_factory=list)  # the extension's input, in order


@dataclass(slots=True)
class _Live:
    id: str
    recorded: str
    script: TaskScript
    polled: int = 0
    updated: int = 0  # the recorded updates accepted
    cancelled: bool = False
    last: dict = field(default_factory=dict)  # the task's fields as last served

    @property
    def status(self) -> str:
        status = self.last.get("status")
        return status if isinstance(status, str) else "working"


def scripts(trace: TracePlan) -> dict[str, TaskScript]:
    """Each recorded task's script, by its recorded id."""
    out: dict[str, TaskScript] = {}
    for session in trace.sessions:
        for call in session.calls:
            answer = answer_obj(call.answer)
            if answer is None:
                continue
            handle = task_handle(answer.get("result"))
            if handle is not None and call.method not in SERVED:
                out.setdefault(handle["taskId"], TaskScript(handle))
                continue
            params = call.request.params if isinstance(call.request.params, dict) else {}
            script = out.get(params.get("taskId")) if isinstance(params.get("taskId"), str) else None
            if script is None:
                continue
            if call.method == "tasks/get":
                script.polls.append(answer)
            elif call.method == "tasks/result":
                script.result = answer
            elif call.method == "tasks/cancel" and "result" in answer:
                script.cancel = answer
            elif call.method == "tasks/update":
                responses = params.get(INPUT_RESPONSES)
                script.updates.append(Update(len(script.polls), frozenset(responses if isinstance(responses, dict) else ()), answer))
    return out


class MockTasks:
    """The mock's live tasks. Thread-safe."""

    def __init__(self, trace: TracePlan) -> None:
        self._scripts = scripts(trace)
        self._live: dict[str, _Live] = {}
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._scripts)

    def created(self, answer: dict) -> dict:
        """`answer` to send for a call: a recorded task handle becomes a new task of the mock's."""
        handle = task_handle(answer.get("result"))
        script = self._scripts.get(handle["taskId"]) if handle is not None else None
        if script is None:
            return answer
        live = _Live(str(uuid.uuid4()), handle["taskId"], script)
        live.last = _fields(handle)
        with self._lock:
            while len(self._live) >= MAX_TASKS:
                self._live.pop(next(iter(self._live)))
            self._live[live.id] = live
        return _renamed(answer, live)

    def serve(self, method: str, params: Any) -> dict | None:
        """The answer object to a `tasks/*` request, or None to leave it to the recorded answers."""
        if method not in SERVED or not self._scripts:
            return None
        if method == "tasks/list":
            with self._lock:
                return {"result": {"tasks": [dict(live.last) for live in self._live.values()]}}
        task_id = params.get("taskId") if isinstance(params, dict) else None
        with self._lock:
            live = self._live.get(task_id) if isinstance(task_id, str) else None
            if live is None:
                if task_id in self._scripts:
                    return None  # a recorded id: the recorded answers, as before tasks were served
                return _refused(f"unknown task {task_id!r} (not one this mock created)")
            if method == "tasks/get":
                return self._poll(live)
            if method == "tasks/result":
                return self._result(live)
            if method == "tasks/update":
                return self._update(live, params)
            return self._cancel(live)

    def _poll(self, live: _Live) -> dict:
        script = live.script
        if live.cancelled:
            return {"result": {**self._template(live), **live.last}}
        waiting = self._waiting(live)
        if waiting is not None and waiting.after == 0:  # it asked in its handle: the handle's question, again
            asked = script.handle.get(INPUT_REQUESTS)
            return {"result": {**self._template(live), **live.last, **({INPUT_REQUESTS: asked} if asked else {})}}
        if not script.polls:  # a recording that fetched the result without polling: done, or still working
            if script.result is not None:
                live.last = {**live.last, "status": "completed"}
            return {"result": {**self._template(live), **live.last}}
        if waiting is not None:  # the poll that asked, again, until the input comes
            return _renamed(script.polls[waiting.after - 1], live)
        answer = _renamed(script.polls[min(live.polled, len(script.polls) - 1)], live)
        live.polled += 1
        if isinstance(answer.get("result"), dict):
            live.last = _fields(answer["result"])
        return answer

    def _result(self, live: _Live) -> dict:
        if live.cancelled:
            return _refused(f"task {live.id} was cancelled")
        if live.script.result is None:
            return _refused(f"the recording has no tasks/result of task {live.recorded}", code=-32601)
        live.polled = len(live.script.polls)  # the task is over: its polls say its last status from now on
        if live.script.polls and isinstance(final := live.script.polls[-1].get("result"), dict):
            live.last = _fields(_renamed({"result": final}, live)["result"])
        return _renamed(live.script.result, live)

    @staticmethod
    def _waiting(live: _Live) -> Update | None:
        """The recorded update the task waits for now: the next one, once its polls have all been served."""
        updates = live.script.updates
        pending = updates[live.updated] if live.updated < len(updates) and not live.cancelled else None
        return pending if pending is not None and live.polled >= pending.after else None

    def _update(self, live: _Live, params: dict) -> dict:
        """The extension's `tasks/update`: accepted when the task waits for input under those keys."""
        pending = self._waiting(live)
        if pending is None:
            return _refused(f"task {live.id} is {live.status}: it asks for no input now")
        responses = params.get(INPUT_RESPONSES)
        if not isinstance(responses, dict) or not responses:
            return _refused(f"tasks/update of task {live.id} carries no inputResponses")
        if unknown := sorted(set(responses) - pending.keys):
            return _refused(f"task {live.id} never asked for input {', '.join(map(repr, unknown))} "
                            f"(it asks for {', '.join(map(repr, sorted(pending.keys)))})")
        live.updated += 1
        answer = _renamed(pending.answer, live)
        if isinstance(answer.get("result"), dict) and "status" in answer["result"]:
            live.last = _fields(answer["result"])
        return answer

    def _cancel(self, live: _Live) -> dict:
        if live.cancelled or live.status in TERMINAL_TASK_STATUSES:
            return _refused(f"task {live.id} is already {live.status}: a task that has ended cannot be cancelled")
        live.cancelled = True
        recorded = live.script.cancel
        if recorded is not None:
            answer = _renamed(recorded, live)
            live.last = _fields(answer["result"])
            return answer
        live.last = {**live.last, "status": "cancelled", "statusMessage": "cancelled by the client"}
        return {"result": {**self._template(live), **live.last}}

    @staticmethod
    def _template(live: _Live) -> dict:
        """What an answer made here carries besides the task's fields: the `resultType` the recorded polls had."""
        polls = live.script.polls
        first = polls[0].get("result") if polls else None
        return {RESULT_TYPE: first[RESULT_TYPE]} if isinstance(first, dict) and RESULT_TYPE in first else {}


def _fields(task: dict) -> dict:
    return {k: task[k] for k in TASK_FIELDS if k in task}


def _renamed(answer: dict, live: _Live) -> dict:
    """`answer` with every occurrence of the recorded task id made the mock's."""
    def walk(value: Any) -> Any:
        if value == live.recorded:
            return live.id
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(answer)


def _refused(message: str, code: int = INVALID_PARAMS) -> dict:
    return {"error": {"code": code, "message": f"mcpbench serve-trace: {message}"}}


__all__ = ["MockTasks", "SERVED", "TaskScript", "scripts"]
