"""Tasks on the reference server, both forms, on the SDK's own hooks (`lab serve`'s tool `work`).

- 2025-11-25 (experimental, core): a `tools/call` of `work` with `task: {ttl}` in its params answers a
  `CreateTaskResult` (`{"task": {...}}`); `tasks/get` polls, `tasks/result` waits for the end and gives
  the tool's result, `tasks/list`, `tasks/cancel`; the server declares `capabilities.tasks` and the
  tool `execution.taskSupport: "optional"`.
- 2026-07-28 (the `io.modelcontextprotocol/tasks` extension, SEP-2663): the server decides; `work`
  becomes a task whenever the request's client capabilities declare the extension, answered with a
  flat `CreateTaskResult` (`resultType: "task"`, the task's fields beside it); `tasks/get` polls and,
  once completed, carries the result; `tasks/cancel`; no `tasks/result`, no `tasks/list`. `work` with
  `ask: true` asks for input mid-task: the task is `input_required`, its polls carry `inputRequests`
  (`confirm`, an `elicitation/create`), until a `tasks/update` answers that key; it then works `ms`
  from the answer and ends saying what was answered. An update naming an unknown task, a task not
  asking, or a key it never asked is refused with -32602.

Why here and not in the SDK: the SDK 2.3 has the types of both forms and the hooks (`ServerMiddleware`,
`Extension`, the client's `ResultClaim`), but no task runtime: its method table leaves 2025-11-25's
`tasks/*` out on purpose and the extension has no server. This is the smallest runtime on those hooks:
one middleware, which sees every request before the SDK validates it. A task does what `work` does
inline (wait `ms`, then say so); it is *working* until `ms` after its creation, then *completed*
(the server has nowhere to run work once a request is answered, and a clock is all `work` needs).

Where tasks are kept (`lab serve --task-store`): in the process's memory (the default, as a server
that keeps its tasks in memory: a poll that reaches another instance behind a balancer finds none),
or in a SQLite file every instance names (a shared store: any instance answers any task). Task times
are wall-clock times, so that processes sharing a store agree on them.

A middleware's own answer is not shaped by the SDK (no `resultType` filled in, no sieve): the
2026-07-28 answers here carry their `resultType` themselves.
"""

import json
import sqlite3
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

import anyio
from mcp.server.context import CallNext
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcpbench.protocol.versions import META_CLIENT_CAPABILITIES, META_RELATED_TASK, TASKS_EXTENSION

WORK_TOOL: Final = "work"
DEFAULT_WORK_MS: Final = 200
# How long a task is kept, and how often a client should poll (ms): short, as a lab's calls are.
TASK_TTL_MS: Final = 60_000
POLL_INTERVAL_MS: Final = 50
# At most this many tasks are kept (the oldest dropped first): a load run must not grow the server.
MAX_TASKS: Final = 10_000
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
# What a failing task says (the variant server's).
FAILED_TEXT: Final = "work failed"


def work_text(ms: int) -> str:
    """What `work` answers, inline or as a task's result."""
    return f"worked {ms} ms"


# What a 2026-07-28 task of `work` with `ask: true` asks for, under its one key.
CONFIRM_KEY: Final = "confirm"
CONFIRM_REQUEST: Final = {"method": "elicitation/create", "params": {
    "mode": "form", "message": "Go ahead with the work?",
    "requestedSchema": {"type": "object", "properties": {"go": {"type": "boolean"}}, "required": ["go"]}}}


async def work(ms: int = DEFAULT_WORK_MS, ask: bool = False) -> str:
    """The tool: wait `ms` milliseconds (at most a minute), then say so. Runs as a task when asked;
    `ask`: as a 2026-07-28 task, ask for a confirmation first (inline, nothing is asked)."""
    await anyio.sleep(max(0, min(ms, 60_000)) / 1000)
    return work_text(ms)


def _iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).isoformat().replace("+00:00", "Z")


@dataclass
class _Task:
    id: str
    ms: int
    created: float  # wall clock (time.time()): instances sharing a store read it alike
    cancelled: float | None = None  # wall clock
    failing: bool = False  # it ends failed (the variant server's change)
    asks: bool = False  # it asks for input (`CONFIRM_KEY`) before it works
    answered: float | None = None  # wall clock of the tasks/update that answered it
    reply: str | None = None  # what that answer's action was

    @property
    def done_at(self) -> float:
        return (self.answered or self.created) + self.ms / 1000

    def row(self) -> str:
        """The task as the shared store keeps it (all but its id)."""
        return json.dumps([self.ms, self.created, self.cancelled, self.failing, self.asks, self.answered, self.reply])

    def status(self) -> str:
        if self.cancelled is not None:
            return "cancelled"
        if self.asks and self.answered is None:
            return "input_required"
        if time.time() < self.done_at:
            return "working"
        return "failed" if self.failing else "completed"

    def wire(self) -> dict[str, Any]:
        """The task's fields (`Task`)."""
        status = self.status()
        updated = self.cancelled if self.cancelled is not None else (self.done_at if status in TERMINAL else self.created)
        wire = {"taskId": self.id, "status": status, "createdAt": _iso(self.created),
                "lastUpdatedAt": _iso(updated), "ttl": TASK_TTL_MS, "pollInterval": POLL_INTERVAL_MS}
        if status == "input_required":
            wire["inputRequests"] = {CONFIRM_KEY: CONFIRM_REQUEST}
        return wire

    def result(self) -> dict[str, Any]:
        """The `tools/call` result the task ends with."""
        text = work_text(self.ms) + (f" ({self.reply})" if self.asks else "")
        return {"content": [{"type": "text", "text": text}], "isError": False,
                "_meta": {META_RELATED_TASK: {"taskId": self.id}}}


class MemoryStore:
    """Tasks in this process's memory: only this instance knows them."""

    def __init__(self) -> None:
        self.tasks: dict[str, _Task] = {}

    def add(self, task: _Task) -> None:
        if len(self.tasks) >= MAX_TASKS:
            self.tasks.pop(next(iter(self.tasks)))
        self.tasks[task.id] = task

    def get(self, task_id: str) -> _Task | None:
        return self.tasks.get(task_id)

    def save(self, task: _Task) -> None:
        """`task` changed (cancelled, answered): in memory it already is."""

    def all(self) -> list[_Task]:
        return list(self.tasks.values())


class SqliteStore:
    """Tasks in a SQLite file that every instance names (`--task-store PATH`): a store shared by the instances."""

    def __init__(self, path: str) -> None:
        # WAL and a busy timeout: several instances write the file at once.
        self.db = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, task TEXT NOT NULL, n INTEGER)")

    def add(self, task: _Task) -> None:
        self.db.execute("INSERT INTO tasks (id, task, n) VALUES (?, ?, (SELECT COALESCE(MAX(n), 0) + 1 FROM tasks))",
                        (task.id, task.row()))
        self.db.execute("DELETE FROM tasks WHERE n <= (SELECT MAX(n) FROM tasks) - ?", (MAX_TASKS,))

    def get(self, task_id: str) -> _Task | None:
        row = self.db.execute("SELECT task FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return None if row is None else _Task(task_id, *json.loads(row[0]))

    def save(self, task: _Task) -> None:
        self.db.execute("UPDATE tasks SET task = ? WHERE id = ?", (task.row(), task.id))

    def all(self) -> list[_Task]:
        return [_Task(task_id, *json.loads(text)) for task_id, text in self.db.execute("SELECT id, task FROM tasks ORDER BY n")]


class Tasks:
    """The server's tasks and the middleware that serves them (`MCPServer(middleware=[Tasks()])`).

    `store`: a SQLite file shared with other instances (None: this process's memory); `failing`:
    every task ends failed (a change a replay must catch: `variant_server.py work-fails`).
    """

    def __init__(self, store: str | None = None, failing: bool = False) -> None:
        self.store = MemoryStore() if store is None else SqliteStore(store)
        self.failing = failing

    async def __call__(self, ctx: Any, call_next: CallNext) -> Any:
        method, params = ctx.method, ctx.params if isinstance(ctx.params, dict) else {}
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if ctx.request_id is None:  # a notification: nothing of ours
            return await call_next(ctx)
        if method == "tools/call" and params.get("name") == WORK_TOOL and self._wanted(params, modern):
            task = self._create(params.get("arguments"), modern)
            return {"resultType": "task", **task.wire()} if modern else {"task": task.wire()}
        if method in ("tasks/get", "tasks/cancel") or (modern and method == "tasks/update") or (
                not modern and method in ("tasks/result", "tasks/list")):
            return await self._serve(method, params, modern)
        result = await call_next(ctx)
        if isinstance(result, dict):
            self._declare(method, result, modern)
        return result

    @staticmethod
    def _wanted(params: dict, modern: bool) -> bool:
        """2025-11-25: the client asked (`task` in the params); 2026-07-28: it declared the extension."""
        if not modern:
            return isinstance(params.get("task"), dict)
        meta = params.get("_meta")
        caps = meta.get(META_CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
        extensions = caps.get("extensions") if isinstance(caps, dict) else None
        return isinstance(extensions, dict) and TASKS_EXTENSION in extensions

    def _create(self, arguments: Any, modern: bool) -> _Task:
        ms = arguments.get("ms", DEFAULT_WORK_MS) if isinstance(arguments, dict) else DEFAULT_WORK_MS
        ms = ms if type(ms) is int and 0 <= ms <= 60_000 else DEFAULT_WORK_MS
        asks = modern and isinstance(arguments, dict) and arguments.get("ask") is True
        task = _Task(str(uuid.uuid4()), ms, time.time(), failing=self.failing, asks=asks)
        self.store.add(task)
        return task

    async def _serve(self, method: str, params: dict, modern: bool) -> dict[str, Any]:
        complete = {"resultType": "complete"} if modern else {}
        if method == "tasks/list":
            return {"tasks": [task.wire() for task in self.store.all()]}
        task = self.store.get(params.get("taskId")) if isinstance(params.get("taskId"), str) else None
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message=f"unknown task {params.get('taskId')!r}")
        if method == "tasks/cancel":
            if task.status() in TERMINAL:
                raise MCPError(code=INVALID_PARAMS, message=f"task {task.id} is already {task.status()}")
            task.cancelled = time.time()
            self.store.save(task)
            return {**complete, **task.wire()}
        if method == "tasks/update":
            return {**complete, **self._update(task, params.get("inputResponses")).wire()}
        if method == "tasks/result":  # waits for the end (2025-11-25)
            if task.status() == "working":
                await anyio.sleep(max(0.0, task.done_at - time.time()))
                task = self.store.get(task.id) or task  # a shared store: another instance may have cancelled it
            if task.status() == "cancelled":
                raise MCPError(code=INVALID_PARAMS, message=f"task {task.id} was cancelled")
            if task.status() == "failed":
                raise MCPError(code=INTERNAL_ERROR, message=FAILED_TEXT)
            return task.result()
        wire = task.wire()
        if modern and wire["status"] == "completed":  # the extension's tasks/get carries the result
            wire["result"] = task.result()
        elif modern and wire["status"] == "failed":  # or the error
            wire["error"] = {"code": INTERNAL_ERROR, "message": FAILED_TEXT}
        return {**complete, **wire}

    def _update(self, task: _Task, responses: Any) -> _Task:
        """The extension's `tasks/update`: the answer to what the task asks, or -32602 saying what is wrong."""
        if task.status() != "input_required":
            raise MCPError(code=INVALID_PARAMS, message=f"task {task.id} is {task.status()}: it asks for no input")
        if not isinstance(responses, dict) or CONFIRM_KEY not in responses:
            raise MCPError(code=INVALID_PARAMS, message=f"task {task.id} asks for input {CONFIRM_KEY!r}: inputResponses lacks it")
        if unknown := sorted(set(responses) - {CONFIRM_KEY}):
            raise MCPError(code=INVALID_PARAMS, message=f"task {task.id} never asked for input {', '.join(map(repr, unknown))}")
        answer = responses[CONFIRM_KEY]
        task.answered = time.time()
        task.reply = str(answer.get("action")) if isinstance(answer, dict) else "answered"
        self.store.save(task)
        return task

    @staticmethod
    def _declare(method: str, result: dict, modern: bool) -> None:
        """Say what the server offers: capabilities (both forms) and, in 2025-11-25, the tool's task support."""
        if method == "initialize" and not modern and isinstance(result.get("capabilities"), dict):
            result["capabilities"]["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        elif method == "server/discover" and isinstance(result.get("capabilities"), dict):
            result["capabilities"].setdefault("extensions", {})[TASKS_EXTENSION] = {}
        elif method == "tools/list" and not modern:
            for tool in result.get("tools") or ():
                if isinstance(tool, dict) and tool.get("name") == WORK_TOOL:
                    tool["execution"] = {"taskSupport": "optional"}


# ---- the client side: the official SDK client calling `work` as a task -------------------------------

# The most polls a driven task gets before the driver gives up (a lab task ends in `ms`: a few polls).
MAX_POLLS: Final = 200


# What the SDK client answers a task's `confirm` with (`call_as_task(..., ask=True)`).
CONFIRMED: Final = {"action": "accept", "content": {"go": True}}


async def call_as_task(client: Any, ms: int = DEFAULT_WORK_MS, *, cancel: bool = False, ask: bool = False) -> dict[str, Any]:
    """Call `work` as a task with the SDK client `client` (an open `mcp.Client`) and follow it to its end,
    in the client's era: 2025-11-25 asks with `task`, polls `tasks/get` and fetches `tasks/result`
    (and lists the tasks); 2026-07-28 (a client built with `tasks_extension()`) gets the handle
    unasked and polls `tasks/get` until the result comes. `cancel`: cancel it after the first poll.
    `ask` (2026-07-28): the task asks for a confirmation mid-task; the poll that shows it asking is
    answered with `tasks/update` (`CONFIRMED` under the key asked), then polled on to its end.

    Returns the handle, the task's statuses (each poll's, then the cancel's) and the final result, as
    the client saw them.
    """
    from mcp_types import (
        CallToolRequest,
        CallToolRequestParams,
        CancelTaskRequest,
        CancelTaskRequestParams,
        GetTaskPayloadRequest,
        GetTaskPayloadRequestParams,
        GetTaskRequest,
        GetTaskRequestParams,
        ListTasksRequest,
        Request,
        TaskMetadata,
    )
    from pydantic import TypeAdapter

    session = client.session
    raw = TypeAdapter(dict[str, Any])
    modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
    if modern:
        arguments = {"ms": ms, "ask": True} if ask else {"ms": ms}
        handle = await session.send_request(CallToolRequest(params=CallToolRequestParams(name=WORK_TOOL, arguments=arguments)), raw)
    else:
        # The SDK client checks a 2025-11-25 tools/call result against CallToolResult, which has no
        # room for a CreateTaskResult (its tasks are left out on purpose): the request goes through
        # the session's dispatcher, as `send_request` sends it, without that check.
        params = CallToolRequestParams(name=WORK_TOOL, arguments={"ms": ms}, task=TaskMetadata(ttl=TASK_TTL_MS))
        handle = await session._dispatcher.send_raw_request("tools/call", params.model_dump(by_alias=True, mode="json", exclude_none=True), {})
    task_id = handle["taskId"] if modern else handle["task"]["taskId"]
    seen: dict[str, Any] = {"handle": handle, "statuses": [], "result": None}
    for _ in range(MAX_POLLS):
        polled = await session.send_request(GetTaskRequest(params=GetTaskRequestParams(task_id=task_id)), raw)
        seen["statuses"].append(polled["status"])
        if cancel and polled["status"] not in TERMINAL:
            cancelled = await session.send_request(CancelTaskRequest(params=CancelTaskRequestParams(task_id=task_id)), raw)
            seen["statuses"].append(cancelled["status"])
            return seen
        if polled["status"] in TERMINAL:
            seen["result"] = polled.get("result")
            break
        if polled["status"] == "input_required":  # the SDK has no type of its own for the extension's update
            update = Request[dict[str, Any], Literal["tasks/update"]](method="tasks/update", params={
                "taskId": task_id, "inputResponses": {key: CONFIRMED for key in polled.get("inputRequests") or {}}})
            seen["statuses"].append(f"updated {(await session.send_request(update, raw))['status']}")
            continue
        await anyio.sleep(polled.get("pollInterval", POLL_INTERVAL_MS) / 1000)
    if not modern:
        seen["result"] = await session.send_request(GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task_id)), raw)
        seen["listed"] = len((await session.send_request(ListTasksRequest(), raw))["tasks"])
    return seen


def tasks_extension() -> Any:
    """What a 2026-07-28 SDK client declares to get tasks (`mcp.Client(extensions=[...])`)."""
    from mcp.client.extension import advertise

    return advertise(TASKS_EXTENSION)
