"""The lab's event store, directly: a Last-Event-ID resumes its own session's stream, never another's."""

import asyncio

from mcpbench.lab.peers import event_store
from mcpbench.lab.peers.event_store import MemoryEventStore


async def _replay(store: MemoryEventStore, scope: int, last_event_id: str) -> tuple[str | None, list]:
    """Replay after `last_event_id` as a request of the session with `scope` would."""
    event_store._scope.set(scope)  # what SessionScopes sets for each request of a session
    sent: list = []

    async def send(event) -> None:
        sent.append(event.message)

    return await store.replay_events_after(last_event_id, send), sent


async def _store_two_sessions(store: MemoryEventStore) -> str:
    """Session 1's stream "1": a priming event, then its answer; session 2's stream "1" too. The priming id."""
    event_store._scope.set(1)
    priming = await store.store_event("1", None)
    await store.store_event("1", {"answer": "for session 1"})
    event_store._scope.set(2)
    await store.store_event("1", None)
    return priming


def test_a_session_resumes_its_own_stream_and_not_anothers():
    async def scenario():
        store = MemoryEventStore()
        priming = await _store_two_sessions(store)
        return await _replay(store, 1, priming), await _replay(store, 2, priming)

    (own, own_sent), (foreign, foreign_sent) = asyncio.run(scenario())
    assert own == "1" and own_sent == [{"answer": "for session 1"}]
    assert foreign is None and foreign_sent == []  # session 2 names session 1's event: nothing replayed


def test_the_leaky_store_replays_across_sessions_when_asked_to():
    async def scenario():
        store = MemoryEventStore(leaky=True)
        return await _replay(store, 2, await _store_two_sessions(store))

    stream, sent = asyncio.run(scenario())
    assert stream == "1" and sent == [{"answer": "for session 1"}]  # the known flaw, kept for the probe's proof
