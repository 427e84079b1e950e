"""2026-07-28 check: closing a request's response stream cancels the request: its progress stops.

2026-07-28, Streamable HTTP: there is no session to send `notifications/cancelled` on; a client
cancels a request by closing its response stream, and the server stops the work. A proxy that
keeps the upstream request open after its client left (or buffers, so the client never sees the
progress it would stop on) leaves the server working for nobody. The probe calls the progress tool
with a progress token, closes the stream after its first progress event, then asks the server how
the call ended: the lab's `progress_ledger` tool (`lab serve --progress-ledger`) says how much
progress was sent under the token and whether the call was cancelled or ran to its end. A server
without such a tool cannot be asked: the row is n/a.
"""

import time
import uuid

from mcpbench.probe import newest
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, PASS, WARN, CheckRow, not_applicable
from mcpbench.protocol.client import Pushed

NAME, TITLE, BOUND = "cancel", "Closing a stream cancels (2026-07-28)", 12.0
LEDGER = "progress_ledger"
# Progress events read before the stream is closed.
CUT_AFTER = 1
# Seconds between two looks at the ledger while the call may still be running.
LOOK_EVERY = 0.25
FIX = ("Close the upstream request when the client closes its response stream (no buffering of text/event-stream, no "
       "keeping the upstream connection after the client left), and have the server stop a request whose stream closed "
       "(the SDKs speaking 2026-07-28 do).")


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if (row := newest.skip(NAME, target, deadline)) is not None:
        return row
    if target.progress is None:
        return not_applicable(NAME, "no tool reports progress here: name one with --progress-tool 'NAME {\"arg\": 1}'")
    if not newest.has_tool(target, LEDGER):
        return not_applicable(NAME, f"the server cannot be asked whether a call went on after its stream closed (the lab's "
                                    f"{LEDGER} tool, lab serve --progress-ledger, is how the probe asks)")
    token = f"probe-cancel-{uuid.uuid4().hex[:12]}"
    session = newest.session(target)
    try:
        ex = session.call("tools/call", target.progress.params(token), deadline=deadline, cut_after=CUT_AFTER)
    finally:
        session.close()
    figures = {"call": target.progress.tool, "cut": ex.cut, "instance": ex.instance, "answered": ex.ok,
               "progress_seen": len(ex.messages(Pushed)),
               "first_progress_at": next((round(t, 3) for t, e in ex.arrivals if type(e) is Pushed), None)}
    closed = time.monotonic()
    ledger, looks = None, 0
    while time.monotonic() < deadline:
        looked, _ = newest.on_instance(target, ex.instance, lambda s: s.call(
            "tools/call", {"name": LEDGER, "arguments": {"token": token}}, deadline=deadline), deadline=deadline)
        looks += 1
        ledger = newest.json_text(looked)
        if isinstance(ledger, dict) and ledger.get("ended") not in (None, "running"):
            break
        time.sleep(LOOK_EVERY)  # the call may still be running: look again (bounded by the deadline)
    figures.update(ledger=ledger, looks=looks, waited=round(time.monotonic() - closed, 3))
    return judge(figures)


def judge(figures: dict) -> CheckRow:
    ledger = figures.get("ledger") if isinstance(figures.get("ledger"), dict) else {}
    call = figures["call"]
    if figures.get("answered") and not figures.get("cut"):
        return CheckRow(NAME, FAIL, f"{call}: no progress came before its answer ({figures['progress_seen']} events): the stream "
                   "could not be closed mid-call (held back until the call ended)", FIX, figures)
    if "ended" not in ledger:
        return CheckRow(NAME, WARN, f"{call}: stream closed after {CUT_AFTER} progress event(s); the server could not say how the "
                   f"call ended ({LEDGER}: {ledger or 'no answer'})", figures=figures)
    first = figures.get("first_progress_at")
    said = (f"{call}: stream closed after {figures['progress_seen']} progress event(s)"
            f"{f' (the first {first:.2f} s after the call)' if first is not None else ''}; the server sent {ledger.get('sent')} "
            f"of {ledger.get('of')} and the call {ledger['ended']}")
    if ledger["ended"] == "cancelled":
        return CheckRow(NAME, PASS, said, figures=figures)
    if ledger["ended"] == "completed":
        return CheckRow(NAME, FAIL, said + ": the close did not reach it", FIX, figures)
    return CheckRow(NAME, WARN, said + f" {figures['waited']:.1f} s after the close", FIX, figures)
