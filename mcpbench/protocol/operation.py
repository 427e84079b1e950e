"""One request of the newest protocol followed to its end, free of I/O: input rounds and tasks.

In 2026-07-28 a `tools/call`, `resources/read` or `prompts/get` may answer `input_required`: the
client answers the `inputRequests` and sends the request again under a new id, with
`inputResponses` under the same keys and the `requestState` echoed as it came (SEP-2322,
`basic/patterns/mrtr`). A request may also become a task, polled to its end (2025-11-25's
experimental tasks: `task` in the params, `tasks/get`, then the blocking `tasks/result`; the
2026-07-28 extension, SEP-2663: a `resultType: "task"` handle, `tasks/get` carrying the result,
`tasks/update` carrying input, `requestState` echoed on every task request). `Operation` says what
to send next; a client path (load, replay, probe) sends it with its own `ClientConnection` and
hands back what came::

    op = Operation("tools/call", {"name": "ask", "arguments": {"question": "?"}}, version, answers=policy)
    action = op.start()
    while type(action) is Send:
        ... wait action.wait (and, when action.answers, the user's think time) ...
        out = conn.send(conn.prepare(action.method, action.params), waiter=w, ts=now)   # a new id every time
        ... action = op.take(answered.answer, now)    # or op.broke(failure, detail, now)
    # action is Done (the final result) or Stop (a failure class of `http.Failure` and why)

Nothing here waits, reads a clock or draws a random number: waits are returned (`Send.wait`) and
times are handed in (`ts`, seconds on any monotonic clock). Every loop is bounded: the rounds by
`max_rounds`, a task by its `ttl` and by the shell's own step timeout (`cancel()` then says what
to send).
"""

from dataclasses import dataclass, field
from typing import Any

from mcpbench.protocol.asks import AskPolicy
from mcpbench.protocol.http import Failure
from mcpbench.protocol.jsonrpc import INVALID_PARAMS, ErrorResponse, Request, Response
from mcpbench.protocol.versions import (
    INPUT_REQUESTS,
    INPUT_RESPONSES,
    REQUEST_STATE,
    RESULT_TYPE,
    RESULT_TYPE_TASK,
    TASKS_EXTENSION,
    TERMINAL_TASK_STATUSES,
    asks_for_input,
    has_task_result,
)

# The rounds a client answers before it gives up on a server that keeps asking: the official SDKs'
# bound (Python's `DEFAULT_INPUT_REQUIRED_MAX_ROUNDS`, TypeScript's `maxRounds`).
MAX_ROUNDS = 10
# A round that carries only a `requestState` (no `inputRequests`) is retried after a short pause that
# doubles up to a cap: the Python SDK's backoff (50 ms doubling to 250 ms), reset by a round with requests.
STATE_ONLY_WAIT, STATE_ONLY_MAX_WAIT = 0.05, 0.25
# Polling a task: at the server's `pollInterval`, held within these bounds (a server asking for a poll
# every millisecond, or once an hour, is not followed), and this often when it names none.
MIN_POLL, MAX_POLL, DEFAULT_POLL = 0.01, 5.0, 0.2

# The error a server answers a `requestState` it cannot open with: -32602, and the official Python
# SDK's frozen wording ("Invalid or expired requestState", data.reason "invalid_request_state").
STATE_WORDS = ("requeststate", "request_state", "request state")

# What a 2026-07-28 client declares in its capabilities to take task handles (the tasks extension,
# SEP-2663: the server then decides per request; a 2025-11-25 client asks per request, `as_task`).
TASK_CAPABILITIES = {"extensions": {TASKS_EXTENSION: {}}}


# --- what to do next --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    """Send `method` with `params` as a new request (a new id), after waiting `wait` seconds.

    `kind`: "call" (the first request), "retry" (a round answering input), "poll" (`tasks/get`),
    "result" (`tasks/result`), "update" (`tasks/update`), "cancel" (`tasks/cancel`).
    `answers`: the kinds of input this request answers (`elicitation/create`, …): a user thinks first.
    """

    method: str
    params: dict
    kind: str
    wait: float = 0.0
    answers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Done:
    """The operation's final result (the last round's, or its task's)."""

    result: Any


@dataclass(frozen=True, slots=True)
class Stop:
    """The operation failed: `failure` is a class of `http.Failure`; `answer` the error that said so, if any."""

    failure: str
    detail: str
    answer: ErrorResponse | None = None


Action = Send | Done | Stop


@dataclass(slots=True)
class TaskState:
    """The task an operation became, as its last handle or status said."""

    id: str
    status: str
    created: float  # when its handle came (the shell's clock)
    ttl: float | None  # seconds it is kept (None: unlimited)
    poll: float  # seconds between polls, within bounds
    state: str | None = None  # the extension's `requestState`, echoed on every task request
    statuses: list[str] = field(default_factory=list)  # each status seen, in order (changes only)
    answered: set = field(default_factory=set)  # input request keys answered (never answered twice)


# --- the driver ---------------------------------------------------------------------------------------


class Operation:
    """One logical request across its input rounds and its task, as a client follows it.

    Args:
        method: the request's method (`tools/call`, …).
        params: its params (the shell's connection adds the 2026-07-28 envelope to each request).
        version: the protocol version spoken (which task methods exist).
        answers: what the user answers each input request with (`asks.AskPolicy`: the same policy
            that answers a handshake-era server request answers the embedded one).
        max_rounds: input rounds answered before the operation stops as `input-rounds-exceeded`.
        as_task: 2025-11-25: ask for a task (`task: {ttl}` in the params; a 2026-07-28 client declares
            the extension in its capabilities instead and the server decides).
        task_ttl: the ttl (seconds) asked for with `as_task`; None: the server's choice.
        poll_bounds: (least, most) seconds between polls.
    """

    def __init__(self, method: str, params: dict | None, version: str | None, *, answers: AskPolicy | None = None,
                 max_rounds: int = MAX_ROUNDS, as_task: bool = False, task_ttl: float | None = None,
                 poll_bounds: tuple[float, float] = (MIN_POLL, MAX_POLL)) -> None:
        if max_rounds < 0:
            raise ValueError("max_rounds must be >= 0")
        self.method = method
        self.params = dict(params or {})
        if as_task and has_task_result(version):
            self.params["task"] = {} if task_ttl is None else {"ttl": int(task_ttl * 1000)}
        self.version = version
        self.answers = answers
        self.max_rounds = max_rounds
        self.poll_bounds = poll_bounds
        self.rounds = 0  # input_required results answered (a one-round operation has 0)
        self.polls = 0  # tasks/get requests sent
        self.asked: dict[str, int] = {}  # input request kind -> how many times it was asked
        self.task: TaskState | None = None
        self.done: Done | Stop | None = None
        self._phase = "new"  # what the last Send was (its answer is read by it)
        self._sent_state = False  # the last round echoed a requestState
        self._state_wait = STATE_ONLY_WAIT

    # --- driving ----------------------------------------------------------------------------------

    def start(self) -> Send:
        """The first request."""
        if self._phase != "new":
            raise RuntimeError("the operation has started")
        return self._send(self.method, self.params, "call")

    def take(self, answer: Response | ErrorResponse, ts: float = 0.0) -> Action:
        """The answer to the last request sent; what to do next."""
        if self.done is not None:
            return self.done
        phase = self._phase
        if phase in ("call", "retry"):
            return self._call_answered(answer, ts)
        if phase == "poll":
            return self._polled(answer, ts)
        if phase == "result":
            return self._result(answer)
        if phase == "update":
            if type(answer) is ErrorResponse:
                return self._stop(Failure.JSONRPC_ERROR, f"tasks/update of task {self.task.id} refused: {_error(answer)}", answer)
            return self._poll(self.task.poll)
        if phase == "cancel":
            how = "acknowledged" if type(answer) is Response else f"refused: {_error(answer)}"
            return self._stop(Failure.TASK_CANCELLED, f"the client cancelled task {self.task.id} ({how})")
        raise RuntimeError(f"no request of this operation is waiting for an answer ({phase})")

    def broke(self, failure: str, detail: str) -> Stop:
        """The last request got no answer (its stream broke, its time ran out): the operation ends so."""
        return self._stop(failure, detail)

    def cancel(self) -> Send | None:
        """The shell gives up on a running task (its step timed out): the `tasks/cancel` to send, or
        None when there is no task to cancel (then the operation just ends)."""
        if self.task is None or self.done is not None or self.task.status in TERMINAL_TASK_STATUSES:
            return None
        return self._send("tasks/cancel", self._task_params(), "cancel")

    # --- rounds -------------------------------------------------------------------------------------

    def _call_answered(self, answer: Response | ErrorResponse, ts: float) -> Action:
        if type(answer) is ErrorResponse:
            about_state = _about_state(answer)
            if about_state or (self._sent_state and answer.code == -32602):
                said = "the requestState it was sent back" if self._sent_state else "a missing requestState"
                return self._stop(Failure.STATE_REJECTED, f"round {self.rounds + 1} refused {said}: {_error(answer)}", answer)
            return self._stop(Failure.JSONRPC_ERROR, _error(answer), answer)
        result = answer.result
        if asks_for_input(result):
            return self._input_required(result)
        handle = task_handle(result)
        if handle is not None:
            return self._task_created(handle, ts)
        return self._finish(result)

    def _input_required(self, result: dict) -> Action:
        self.rounds += 1
        if self.rounds > self.max_rounds:
            return self._stop(Failure.INPUT_ROUNDS_EXCEEDED,
                              f"the server asked for input {self.rounds} times; the bound is {self.max_rounds} rounds")
        requests = result.get(INPUT_REQUESTS)
        state = result.get(REQUEST_STATE)
        if requests is None and state is None:
            return self._stop(Failure.INPUT_UNANSWERED, "an input_required result with neither inputRequests nor requestState")
        params = {k: v for k, v in self.params.items() if k not in (INPUT_RESPONSES, REQUEST_STATE)}
        kinds: tuple[str, ...] = ()
        wait = 0.0
        if requests:
            responses = self._answer(requests)
            if type(responses) is Stop:
                return responses
            params[INPUT_RESPONSES], kinds = responses
            self._state_wait = STATE_ONLY_WAIT
        else:  # state only: the server is not ready yet; retry soon, then less soon
            wait, self._state_wait = self._state_wait, min(self._state_wait * 2, STATE_ONLY_MAX_WAIT)
        if state is not None:
            params[REQUEST_STATE] = state  # the very value that came: never parsed, never rebuilt
        self._sent_state = state is not None
        return self._send(self.method, params, "retry", wait, kinds)

    def _answer(self, requests: Any) -> "tuple[dict, tuple[str, ...]] | Stop":
        """Each embedded request answered by the policy: (`inputResponses`, the kinds answered)."""
        if not isinstance(requests, dict):
            return self._stop(Failure.INPUT_UNANSWERED, f"inputRequests is a {type(requests).__name__}, not a map of requests")
        responses: dict[str, Any] = {}
        kinds: list[str] = []
        for key, request in requests.items():
            method = request.get("method") if isinstance(request, dict) else None
            if not isinstance(method, str):
                return self._stop(Failure.INPUT_UNANSWERED, f"inputRequests[{key!r}] is not a request")
            self.asked[method] = self.asked.get(method, 0) + 1
            params = request.get("params")
            asked = Request(id=key, method=method, params=params if isinstance(params, dict) else None, _parsed=True)
            reply = self.answers.answer(asked) if self.answers is not None else None
            if type(reply) is not Response:
                why = reply.message if type(reply) is ErrorResponse else "no answer"
                return self._stop(Failure.INPUT_UNANSWERED, f"inputRequests[{key!r}] asks {method}: {why}")
            responses[key] = reply.result
            if method not in kinds:
                kinds.append(method)
        return responses, tuple(kinds)

    def _finish(self, result: Any) -> Done:
        self.done = Done(result)
        return self.done

    # --- tasks --------------------------------------------------------------------------------------

    def _task_created(self, handle: dict, ts: float) -> Action:
        status = handle.get("status")
        task = self.task = TaskState(
            id=handle["taskId"], status=status if isinstance(status, str) else "working", created=ts,
            ttl=_ttl(handle), poll=self._interval(handle),
        )
        task.statuses.append(task.status)
        self._remember_state(handle)
        return self._poll(task.poll)

    def _polled(self, answer: Response | ErrorResponse, ts: float) -> Action:
        task = self.task
        if type(answer) is ErrorResponse:
            return self._stop(_refused(task, answer, ts), f"tasks/get of task {task.id} after {self.polls} polls: {_error(answer)}", answer)
        result = answer.result if isinstance(answer.result, dict) else {}
        status = result.get("status")
        if isinstance(status, str) and status != task.status:
            task.status = status
            task.statuses.append(status)
        task.poll = self._interval(result, task.poll)
        self._remember_state(result)
        if task.status == "cancelled":
            return self._stop(Failure.TASK_CANCELLED, f"task {task.id} was cancelled{_said(result)}")
        if has_task_result(self.version):
            if task.status in ("completed", "failed", "input_required"):
                # 2025-11-25: the result (or the error) comes from tasks/result, which blocks until the end;
                # input the task needs is asked for on that request's stream, as server requests.
                return self._send("tasks/result", {"taskId": task.id}, "result")
        elif task.status == "completed":
            return self._finish(result.get("result"))
        elif task.status == "failed":
            error = result.get("error")
            said = _error_text(error) if isinstance(error, dict) else f"no error given{_said(result)}"
            return self._stop(Failure.TASK_FAILED, f"task {task.id} failed: {said}")
        elif task.status == "input_required":
            return self._task_input(result)
        if task.ttl is not None and ts - task.created > task.ttl:
            return self._stop(Failure.TASK_EXPIRED, f"task {task.id} still {task.status} {ts - task.created:.1f} s after it was "
                                                    f"created, past its ttl of {task.ttl:g} s")
        return self._poll(task.poll)

    def _task_input(self, result: dict) -> Action:
        """2026-07-28: the task asks for input; what it asks that is not answered yet goes in `tasks/update`."""
        task = self.task
        requests = result.get(INPUT_REQUESTS)
        pending = {k: v for k, v in requests.items() if k not in task.answered} if isinstance(requests, dict) else requests
        if not pending:  # all answered already: the server has not caught up (the update is eventually consistent)
            return self._poll(task.poll)
        self.rounds += 1
        if self.rounds > self.max_rounds:
            return self._stop(Failure.INPUT_ROUNDS_EXCEEDED,
                              f"task {task.id} asked for input {self.rounds} times; the bound is {self.max_rounds} rounds")
        responses = self._answer(pending)
        if type(responses) is Stop:
            return responses
        answers, kinds = responses
        task.answered.update(answers)
        return self._send("tasks/update", {**self._task_params(), INPUT_RESPONSES: answers}, "update", 0.0, kinds)

    def _result(self, answer: Response | ErrorResponse) -> Action:
        """2025-11-25's `tasks/result`: the real result, or the error the task failed with."""
        task = self.task
        if type(answer) is ErrorResponse:
            failure = Failure.TASK_CANCELLED if task.status == "cancelled" else Failure.TASK_FAILED
            return self._stop(failure, f"tasks/result of task {task.id}: {_error(answer)}", answer)
        return self._finish(answer.result)

    def _poll(self, wait: float) -> Send:
        self.polls += 1
        return self._send("tasks/get", self._task_params(), "poll", wait)

    def _task_params(self) -> dict:
        params: dict = {"taskId": self.task.id}
        if self.task.state is not None:
            params[REQUEST_STATE] = self.task.state
        return params

    def _remember_state(self, result: dict) -> None:
        """The extension: the latest task message's `requestState` goes on the next task request; one
        without any means none is sent (SEP-2663, "Request State Management")."""
        if not has_task_result(self.version):
            state = result.get(REQUEST_STATE)
            self.task.state = state if isinstance(state, str) else None

    def _interval(self, obj: dict, default: float = DEFAULT_POLL) -> float:
        """The server's poll interval (ms: the extension's `pollIntervalMilliseconds`, 2025-11-25's
        `pollInterval`), within the bounds."""
        ms = obj.get("pollIntervalMilliseconds", obj.get("pollInterval"))
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or ms != ms:
            return default
        low, high = self.poll_bounds
        return min(max(ms / 1000.0, low), high)

    # --- bookkeeping ----------------------------------------------------------------------------------

    def _send(self, method: str, params: dict, kind: str, wait: float = 0.0, answers: tuple[str, ...] = ()) -> Send:
        self._phase = kind
        return Send(method, params, kind, wait, answers)

    def _stop(self, failure: str, detail: str, answer: ErrorResponse | None = None) -> Stop:
        self.done = Stop(failure, detail, answer)
        return self.done


# --- reading results ------------------------------------------------------------------------------------


def task_handle(result: Any) -> dict | None:
    """The task a result hands back instead of the real result, or None: 2025-11-25's `CreateTaskResult`
    (`{"task": {"taskId": …}}`) or the 2026-07-28 extension's (`resultType: "task"`, the task's fields inline)."""
    if not isinstance(result, dict):
        return None
    if result.get(RESULT_TYPE) == RESULT_TYPE_TASK and isinstance(result.get("taskId"), str):
        return result
    nested = result.get("task")
    if isinstance(nested, dict) and isinstance(nested.get("taskId"), str):
        return nested
    return None


def _ttl(handle: dict) -> float | None:
    """How long the server keeps the task, in seconds (the extension's `ttlSeconds`, 2025-11-25's `ttl` in ms)."""
    seconds = handle.get("ttlSeconds")
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > 0:
        return float(seconds)
    ms = handle.get("ttl")
    if isinstance(ms, (int, float)) and not isinstance(ms, bool) and ms > 0:
        return ms / 1000.0
    return None


def _about_state(answer: ErrorResponse) -> bool:
    """Whether an error is about the `requestState` (its message, or its data's reason, names it)."""
    data = answer.data
    reason = data.get("reason") if isinstance(data, dict) else None
    text = f"{answer.message} {reason if isinstance(reason, str) else ''}".lower()
    return any(word in text for word in STATE_WORDS)


def _refused(task: "TaskState", answer: ErrorResponse, ts: float) -> str:
    """The class of a refused poll (or update): past the task's ttl the server may let it go
    (task-expired); within it, -32602, the code the spec names for an unknown task id, says the
    server does not know the task (task-not-found: created on another instance, say); any
    other error is the server's own (jsonrpc-error)."""
    if task.ttl is not None and ts - task.created > task.ttl:
        return Failure.TASK_EXPIRED
    return Failure.TASK_NOT_FOUND if answer.code == INVALID_PARAMS else Failure.JSONRPC_ERROR


def _error(answer: ErrorResponse) -> str:
    return f"{answer.code}: {answer.message}"


def _error_text(error: dict) -> str:
    return f"{error.get('code')}: {error.get('message')}"


def _said(result: dict) -> str:
    message = result.get("statusMessage")
    return f" ({message})" if isinstance(message, str) and message else ""


__all__ = ["Action", "Done", "MAX_ROUNDS", "Operation", "Send", "Stop", "TASK_CAPABILITIES", "TaskState", "task_handle"]
