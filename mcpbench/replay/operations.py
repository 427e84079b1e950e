"""What a replay does with a recording's whole operations (2026-07-28 input rounds, tasks, listen streams),
read from a session's plan, and how it judges them; no I/O.

- **Input rounds.** A recorded `input_required` round and the retries that answered it are re-run
  live: each live `inputRequests` key is answered with what the recording's client answered under
  that key (`RoundAnswers`: the recorded retry of the same round first, then any round of the
  operation). A live key the recording never answered cannot be answered: that is a change, named.
- **Tasks.** A recorded call that became a task, with its polls and its end (`TaskGroup`), is followed
  live to its end by the client core (`protocol/operation.py`): its own polls, at the live server's
  interval. The recorded polls are not compared one by one (how many a task needs is timing); the
  end is, on the call that carried it in the recording (2025-11-25's `tasks/result`, the extension's
  last `tasks/get`). Live task ids are read as the recorded ones (`rename`), and timestamps are the
  comparison's default noise. A recording whose client cancelled its task is sent as recorded
  instead (the cancel at the same point), the ids mapped. A task that asked for input mid-task
  (2026-07-28) is followed too: its live `tasks/update` goes after the live poll that shows it
  asking, with the recorded update's `inputResponses` by key (`UpdateAnswers`); a key the recording
  never answered stops it, named.
- **Listen streams.** The changes a recorded listen stream told are each filed under their cause, the
  latest request sent after the listen opened and before the change came (the mock does the same,
  `mock_listen.py`); live, each change is matched to a recorded one of the same notification whose
  cause had been sent before it arrived (`listen_views`): what is left over on either side is the
  difference, under the cause's name.
"""

from dataclasses import dataclass, field
from typing import Any

from mcpbench.protocol.jsonrpc import INVALID_PARAMS, ErrorResponse, Request, Response
from mcpbench.protocol.operation import task_handle
from mcpbench.protocol.versions import INPUT_RESPONSES, LISTEN, LISTEN_ACKNOWLEDGED, META_SUBSCRIPTION_ID
from mcpbench.replay.plan import RecordedCall, SessionPlan, answer_obj

# The methods of a task, each naming it by `taskId`.
TASK_CALLS = frozenset({"tasks/get", "tasks/result", "tasks/cancel", "tasks/update"})
# Under what key a listen stream's acknowledgement is compared (its cause is the listen itself).
OPENED = "(opened)"
# Under what key a change no request preceded is compared.
UNCAUSED = "(no request before it)"


@dataclass(slots=True)
class TaskGroup:
    """One recorded task: the call that became it and the calls that followed it (indexes in the plan)."""

    create: int
    task_id: str
    polls: list[int] = field(default_factory=list)
    results: list[int] = field(default_factory=list)  # tasks/result
    cancels: list[int] = field(default_factory=list)
    updates: list[int] = field(default_factory=list)

    @property
    def followed(self) -> bool:
        """Whether the replay follows the live task itself, its input answered from the recorded
        updates (else it sends the recorded calls: the recording's client cancelled the task at a
        point the replay keeps)."""
        return not self.cancels

    @property
    def members(self) -> list[int]:
        return sorted(self.polls + self.results + self.cancels + self.updates)

    def final(self, plan: SessionPlan) -> int | None:
        """The call whose answer is the task's recorded end: its last `tasks/result`, else its last poll
        that says the task ended."""
        if self.results:
            return self.results[-1]
        for index in reversed(self.polls):
            result = answer_obj(plan.calls[index].answer)
            status = result.get("result", {}).get("status") if result and isinstance(result.get("result"), dict) else None
            if status in ("completed", "failed", "cancelled"):
                return index
        return None


def task_groups(plan: SessionPlan) -> dict[int, TaskGroup]:
    """Each recorded task of `plan` by the index of every call of it (the creating call's too)."""
    by_id: dict[str, TaskGroup] = {}
    out: dict[int, TaskGroup] = {}
    for call in plan.calls:
        answer = answer_obj(call.answer)
        handle = task_handle(answer.get("result")) if answer else None
        if handle is not None and call.method not in TASK_CALLS:
            group = by_id.setdefault(handle["taskId"], TaskGroup(call.index, handle["taskId"]))
            out[call.index] = group
            continue
        params = call.request.params if isinstance(call.request.params, dict) else {}
        group = by_id.get(params.get("taskId")) if call.method in TASK_CALLS and isinstance(params.get("taskId"), str) else None
        if group is None:
            continue
        {"tasks/get": group.polls, "tasks/result": group.results, "tasks/cancel": group.cancels,
         "tasks/update": group.updates}[call.method].append(call.index)
        out[call.index] = group
    return out


def rename(value: Any, names: dict[str, str]) -> Any:
    """`value` with every string that `names` holds replaced by its name (live task ids by the recorded ones)."""
    if not names:
        return value
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, dict):
        return {k: rename(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [rename(v, names) for v in value]
    return value


class RoundAnswers:
    """The recording's answers to each operation's input requests, by key."""

    def __init__(self, plan: SessionPlan) -> None:
        self.plan = plan
        self.next_round: dict[int, int] = {}  # a round's index -> the recorded retry that answered it
        self._by_root: dict[int, dict[str, Any]] = {}  # the operation's first round -> key -> first answer
        for call in plan.calls:
            if call.retry_of is None:
                continue
            self.next_round[call.retry_of] = call.index
            responses = _responses(call)
            answers = self._by_root.setdefault(self.root(call.index), {})
            for key, value in responses.items():
                answers.setdefault(key, value)

    def root(self, index: int) -> int:
        """The first round of the operation `index` is a round of."""
        seen = 0
        while (earlier := self.plan.calls[index].retry_of) is not None and seen < len(self.plan.calls):
            index, seen = earlier, seen + 1
        return index

    def answer(self, round_index: int, retry_index: int | None, key: str) -> tuple[bool, Any]:
        """(found, the recorded answer) to input `key` asked by the live round of `round_index`."""
        if retry_index is not None:
            responses = _responses(self.plan.calls[retry_index])
            if key in responses:
                return True, responses[key]
        answers = self._by_root.get(self.root(round_index), {})
        return (True, answers[key]) if key in answers else (False, None)


class UpdateAnswers:
    """The recording's answers to a task's input (its `tasks/update` `inputResponses`), by key: the
    `AskPolicy` a followed task's live input requests are answered with (`Operation` names each by key)."""

    def __init__(self, plan: SessionPlan, group: TaskGroup) -> None:
        self.by_key: dict[str, Any] = {}
        for index in group.updates:
            for key, value in _responses(plan.calls[index]).items():
                self.by_key.setdefault(key, value)

    def answer(self, request: Request) -> Response | ErrorResponse:
        if request.id in self.by_key:
            return Response(id=request.id, result=self.by_key[request.id])
        return ErrorResponse(id=request.id, code=INVALID_PARAMS,
                             message=f"the live task asks for input {request.id!r} ({request.method}), which the recording never answered")

    def capabilities(self) -> dict:
        return {}


def _responses(call: RecordedCall) -> dict:
    params = call.request.params if isinstance(call.request.params, dict) else {}
    responses = params.get(INPUT_RESPONSES)
    return responses if isinstance(responses, dict) else {}


# --- listen streams ------------------------------------------------------------------------------


def _note(note: dict) -> dict:
    """A listen stream's notification as compared: without its subscription tag (the listen's id)."""
    params = note.get("params")
    if isinstance(params, dict) and isinstance(params.get("_meta"), dict) and META_SUBSCRIPTION_ID in params["_meta"]:
        meta = {k: v for k, v in params["_meta"].items() if k != META_SUBSCRIPTION_ID}
        params = {k: v for k, v in params.items() if k != "_meta"} | ({"_meta": meta} if meta else {})
    out = {"method": note.get("method")}
    if params:
        out["params"] = params
    return out


def recorded_causes(plan: SessionPlan, listen: RecordedCall) -> list[tuple[str, dict]]:
    """The recorded listen's notifications with their causes' labels, in order."""
    out: list[tuple[str, dict]] = []
    for ts, note in listen.server:
        if not isinstance(note, dict):
            continue
        if note.get("method") == LISTEN_ACKNOWLEDGED:
            out.append((OPENED, _note(note)))
            continue
        before = [c for c in plan.calls if c.method != LISTEN and listen.sent <= c.sent <= ts]
        cause = max(before, key=lambda c: c.sent) if before else None
        out.append((_label(cause) if cause is not None else UNCAUSED, _note(note)))
    return out


def listen_views(plan: SessionPlan, listen: RecordedCall, live: list[tuple[float, dict]],
                 sent: dict[int, float]) -> tuple[dict, dict]:
    """What is compared of a listen stream, recorded and live: `{"changes": {cause: [notification, …]}}`.

    `live`: (arrival, notification) as the replay heard them; `sent`: each recorded call's index ->
    when its live request left. A live notification is matched to the first recorded one still
    unmatched, equal to it, whose cause had been sent before it arrived; one matching nothing is
    filed under the latest call sent before it.
    """
    recorded = recorded_causes(plan, listen)
    by_label = {_label(c): c.index for c in plan.calls}
    old: dict[str, list[dict]] = {}
    for label, note in recorded:
        old.setdefault(label, []).append(note)
    new: dict[str, list[dict]] = {label: [] for label in old}
    matched = [False] * len(recorded)
    for arrived, raw in live:
        note = _note(raw)
        found = None
        for i, (label, want) in enumerate(recorded):
            if matched[i] or want != note:
                continue
            cause = by_label.get(label)
            if label in (OPENED, UNCAUSED) or (cause is not None and sent.get(cause, arrived + 1) <= arrived):
                found = i
                break
        if found is not None:
            matched[found] = True
            new[recorded[found][0]].append(note)
            continue
        before = [(ts, index) for index, ts in sent.items() if ts <= arrived and plan.calls[index].method != LISTEN]
        label = _label(plan.calls[max(before)[1]]) if before else UNCAUSED
        new.setdefault(label, []).append(note)
    return {"changes": old}, {"changes": {label: notes for label, notes in new.items() if notes or label in old}}


def _label(call: RecordedCall) -> str:
    return f"#{call.index} {call.label}"


__all__ = ["OPENED", "RoundAnswers", "TaskGroup", "UNCAUSED", "UpdateAnswers", "listen_views", "recorded_causes", "rename", "task_groups"]
