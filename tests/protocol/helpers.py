"""Helpers for protocol tests: feed a decoder whole, byte by byte, and in random chunks."""

from mcpbench.protocol.framing import Signal


def drain(machine) -> list:
    """Every event a sans-IO machine has ready."""
    out = []
    while not isinstance(event := machine.next_event(), Signal):
        out.append(event)
    return out


def feed_all(factory, data: bytes, splits=None, *, eof: bool = True) -> list:
    """Events from a fresh machine fed `data` cut at `splits` (None: whole)."""
    machine = factory()
    cuts = [0, *sorted(splits or ()), len(data)]
    events = []
    for start, end in zip(cuts, cuts[1:]):
        if end > start:
            machine.receive_data(data[start:end])
            events += drain(machine)
    if eof:
        machine.receive_data(b"")
        events += drain(machine)
    return events


def byte_by_byte(factory, data: bytes, *, eof: bool = True) -> list:
    return feed_all(factory, data, range(1, len(data)), eof=eof)
