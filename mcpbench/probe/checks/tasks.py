"""2026-07-28 check: a task created on one instance is found by polls wherever they land.

With the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) a call may come back as a task
handle, which the client polls with `tasks/get`. Each poll is a request of its own: behind a
balancer that spreads requests it reaches any instance, and one that keeps its tasks in its own
memory answers "unknown task". The probe calls the task tool (the lab's `work`) declaring the
extension, then polls the task several times on fresh connections, noting where each poll landed.
"""

import time

from mcpbench.probe import newest
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow, not_applicable
from mcpbench.protocol.operation import TASK_CAPABILITIES, task_handle
from mcpbench.protocol.versions import TASKS_EXTENSION

NAME, TITLE, BOUND = "tasks", "Tasks across instances (2026-07-28)", 10.0
TOOL, ARGUMENTS = "work", {"ms": 400}
POLLS = 5
# Seconds between polls, whatever the server's pollInterval (a probe polls a few times, quickly).
POLL_EVERY = 0.05
FIX = ("Keep tasks where every instance can read them (a database or cache shared by the instances), or route tasks/get "
       "to the instance that created the task (its Mcp-Name header carries the task id).")


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if (row := newest.skip(NAME, target, deadline)) is not None:
        return row
    capabilities = (newest.discovered(target, deadline).get("result") or {}).get("capabilities") or {}
    if TASKS_EXTENSION not in (capabilities.get("extensions") or {}) or not newest.has_tool(target, TOOL):
        return not_applicable(NAME, f"no task to follow: the server offers no tasks ({TASKS_EXTENSION}), or no task tool the "
                                    f"probe knows (it calls {TOOL} on the lab's reference server only)")
    one = newest.session(target, capabilities=TASK_CAPABILITIES)
    try:
        created = one.call("tools/call", {"name": TOOL, "arguments": ARGUMENTS}, deadline=deadline)
    finally:
        one.close()
    handle = task_handle(created.result) if created.ok else None
    figures: dict = {"created_on": created.instance, "handle": handle is not None, "polls": []}
    if handle is None:
        failure = created.failure()
        figures["detail"] = failure[1] if failure else "a result, not a task handle"
        return judge(figures)
    for _ in range(POLLS):
        poll = newest.session(target, capabilities=TASK_CAPABILITIES)
        try:
            ex = poll.call("tasks/get", {"taskId": handle["taskId"]}, deadline=deadline)
        finally:
            poll.close()
        failure = ex.failure()
        figures["polls"].append({"on": ex.instance, "found": ex.ok, "status": (ex.result or {}).get("status") if ex.ok else None,
                                 "detail": failure[1] if failure else None})
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL_EVERY)  # the polls' own spacing (bounded by POLLS)
    return judge(figures)


def judge(figures: dict) -> CheckRow:
    if not figures.get("handle"):
        return CheckRow(NAME, WARN, f"{TOOL} did not become a task: {figures.get('detail')}", figures=figures)
    polls, home = figures["polls"], figures.get("created_on")
    elsewhere = [p for p in polls if home is not None and p["on"] is not None and p["on"] != home]
    lost = [p for p in polls if not p["found"]]
    figures.update(elsewhere=len(elsewhere), lost=len(lost))
    where = f" on {home}" if home else ""
    evidence = (f"task created{where}; {len(polls)} polls, {len(elsewhere)} on another instance; {len(lost)} did not find it"
                + (f" ({lost[0]['detail']}{' on ' + lost[0]['on'] if lost[0]['on'] else ''})" if lost else ""))
    if lost:
        return CheckRow(NAME, FAIL, evidence, FIX, figures)
    statuses = [p["status"] for p in polls]
    return CheckRow(NAME, PASS, evidence + f"; statuses {' → '.join(dict.fromkeys(statuses))}", figures=figures)
