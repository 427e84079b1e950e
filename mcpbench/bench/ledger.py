"""A client's own record of the messages it sent and received, and its reconciliation with a trace.

`MessageLedger.on_message` is a load client's `on_message` hook (`McpClient`): it counts each message's
digest per client session and direction. `trace_counts` counts a trace's messages the same way,
and `reconcile` compares the two: a message the client sent or received that the trace lacks is
*lost*, one the trace holds more often than the client saw it is *duplicated*, and one the trace
holds that never reached the client (a stream cut after the proxy wrote it, a user stopped
mid-call) is *unreceived*, which is not a fault of the recording.

A digest is that of the message's JSON value with sorted keys, so the same message hashes alike
whether the client built it, parsed it, or a trace holds it. No Locust here: `mcpbench bench
soak` imports this module in its own process.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from mcpbench.load.client import UNFINISHED
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.http import pair_with_post
from mcpbench.protocol.jsonrpc import Batch, Message, Request

DIRECTIONS = ("c2s", "s2c")
KINDS = (*DIRECTIONS, UNFINISHED)
# Client messages of sessions whose id never came (an `initialize` without an answer) are matched
# against the trace's messages under this key, with those the trace keeps under no session id.
NO_SESSION = "?"

Counts = dict[str, dict[str, Counter]]  # session -> direction -> digest -> count


def digest(message: Message) -> str:
    """16 hex digits naming a message by its JSON value."""
    canonical = orjson.dumps(jsonrpc.to_obj(message), option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(canonical, digest_size=8).hexdigest()


class MessageLedger:
    """Counts every message of every client session it is told about (keyed by the connection)."""

    def __init__(self) -> None:
        self._sessions: dict[Any, dict[str, Counter]] = {}

    def on_message(self, direction: str, message: Message, conn: Any) -> None:
        counts = self._sessions.get(conn)
        if counts is None:
            counts = self._sessions[conn] = {d: Counter() for d in KINDS}
        counts[direction][digest(message)] += 1

    def sessions(self) -> Iterator[dict]:
        """One JSON-ready record per client session: its session id and counts per direction."""
        for conn, counts in self._sessions.items():
            yield {"session": getattr(conn, "session_id", None), **{d: dict(c) for d, c in counts.items()}}


def merge(records: Iterable[dict]) -> Counts:
    """Ledger records (from one or more processes) summed per session id."""
    out: Counts = {}
    for record in records:
        key = record.get("session") or NO_SESSION
        counts = out.setdefault(key, {d: Counter() for d in KINDS})
        for direction in KINDS:
            counts[direction].update(record.get(direction) or {})
    return out


def trace_counts(events: Iterable[dict]) -> Counts:
    """The `message` events of a trace, counted like a ledger (sessionless keys pooled as `NO_SESSION`).

    An error answer to a POST under a null id (the server could not read the request) is counted
    with the id of the request its exchange carried, as the client core hands it to the client
    (`http.pair_with_post`; a trace event carries no status, so a foreign id stays as it is).
    """
    out: Counts = {}
    asked: dict[Any, Any] = {}  # flow -> the id of the request it carried
    for event in events:
        if event.get("kind") != "message" or event.get("dir") not in DIRECTIONS:
            continue
        session = event.get("session")
        key = session if session and not session.startswith("conn-") else NO_SESSION
        counts = out.setdefault(key, {d: Counter() for d in DIRECTIONS})
        try:
            message = jsonrpc.from_obj(event["msg"])
        except jsonrpc.InvalidMessage:
            continue  # recorded as a violation too; no client sends or accepts it as a message
        flow = event.get("flow")
        if type(message) is Request and event["dir"] == "c2s" and flow is not None:
            asked[flow] = message.id
        for item in message.items if type(message) is Batch else (message,):
            if event["dir"] == "s2c" and (paired := pair_with_post(item, asked.get(flow), None)) is not None:
                item = paired
            counts[event["dir"]][digest(item)] += 1
    return out


def reconcile(client: Counts, trace: Counts) -> dict[str, Any]:
    """Lost, duplicated and unreceived messages of a trace against the clients' ledgers, in all
    and per direction, with up to 5 examples of each fault (session, direction, digest).

    `unfinished`: sends that did not finish, which the trace may hold once or not at all."""
    totals = {name: {d: 0 for d in DIRECTIONS} for name in ("client", "trace", "lost", "duplicated", "unreceived", "unfinished")}
    examples: dict[str, list] = {"lost": [], "duplicated": []}
    for session in client.keys() | trace.keys():
        unsure = client.get(session, {}).get(UNFINISHED, Counter())
        totals["unfinished"]["c2s"] += sum(unsure.values())
        for direction in DIRECTIONS:
            mine = client.get(session, {}).get(direction, Counter())
            theirs = trace.get(session, {}).get(direction, Counter())
            totals["client"][direction] += sum(mine.values())
            totals["trace"][direction] += sum(theirs.values())
            for key in mine.keys() | theirs.keys() | (unsure.keys() if direction == "c2s" else set()):
                seen, held = mine.get(key, 0), theirs.get(key, 0)
                maybe = unsure.get(key, 0) if direction == "c2s" else 0
                faults = {"lost": max(0, seen - held), "duplicated": max(0, held - max(seen + maybe, 1)),
                          "unreceived": int(seen + maybe == 0 and held > 0)}
                for name, count in faults.items():
                    totals[name][direction] += count
                    if count and name in examples and len(examples[name]) < 5:
                        examples[name].append([session, direction, key])
    return {name: {"total": sum(by.values()), **by} for name, by in totals.items()} | {"examples": examples}


def read_records(folder: Path, pattern: str) -> list[dict]:
    """The JSON lines of every file in `folder` matching `pattern`."""
    return [orjson.loads(line) for path in sorted(folder.glob(pattern)) for line in path.read_bytes().splitlines() if line.strip()]
