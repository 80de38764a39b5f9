"""A part's protobuf entries of each metric, joined in the order of its chunks, with
each chunk's end in them: a render serializes the chunks new since the last one and
puts their entries in among runs of the last render's bytes. Kept a piece a chunk
and a metric, they were 300,000 objects at 10,000 queues, twice the bytes they serve."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import NamedTuple

# One chunk's entries by metric, as serialized for it: not kept past a render.
Pieces = dict[str, bytes]
# Where a part's chunks' entries come from: a run of the last render's chunks (their
# places there), or one chunk's pieces.
Source = range | Pieces


class Entries(NamedTuple):
    """A part's protobuf entries of one metric, joined, and their length. ``ends``: each
    chunk's end in them, in the part's order (None: made whole, of a few chunks)."""

    length: int
    pieces: list[bytes]  # one: the entries joined
    ends: array[int] | None = None


class Built(NamedTuple):
    """A part's entries by metric, and the records of its chunks (looked at by
    identity) in the order their ends are in."""

    entries: dict[str, Entries]
    made: Sequence[object]


def built_anew(batches: Iterable[list[Pieces]]) -> dict[str, Entries]:
    """The entries of chunks no render before had, their pieces a batch at a time: one
    batch's pieces are alive at once, not every chunk's."""
    made: list[tuple[int, dict[str, Entries]]] = []
    for batch in batches:
        sources: list[Source] = [*batch]
        made.append((len(batch), _assembled({}, sources, _names(sources))))
    return _served(_concatenated(made))


def spliced(
    built: Built, made: Sequence[object], pieces: dict[int, Pieces], changed: list[int] | None
) -> dict[str, Entries]:
    """The entries of the chunks whose records are ``made``: where ``built.made`` has
    the record, its entries there; else its ``pieces`` (by the record's id). ``changed``:
    the places where ``made`` and ``built.made`` (as many) differ, when known. A metric
    whose entries are the same in every changed place keeps its Entries object."""
    last = built.made
    if len(made) != len(last):
        index = {id(record): i for i, record in enumerate(last)}
        runs = _runs([pieces[id(r)] if id(r) in pieces else index[id(r)] for r in made])
        return _served(_assembled(built.entries, runs, _names(runs) | set(built.entries)))
    if changed is None:
        changed = [i for i, (a, b) in enumerate(zip(made, last, strict=True)) if a is not b]
    if not changed:
        return built.entries
    at = {id(last[i]): i for i in changed}
    found = [pieces[id(made[i])] if id(made[i]) in pieces else at[id(made[i])] for i in changed]
    kept = _unchanged(built.entries, changed, found)
    sources = _in_places(changed, found, len(made))
    names = (_names(sources) | set(built.entries)) - kept
    entries = {name: built.entries[name] for name in kept}
    entries.update(_assembled(built.entries, sources, names))
    return _served(entries)


def _in_places(changed: list[int], found: list[Pieces | int], chunks: int) -> list[Source]:
    """The sources of ``chunks`` whose ``changed`` places hold ``found`` (pieces, or the
    place in the last render of a chunk that moved), every other place what it held."""
    sources: list[Source] = []
    at = 0
    for place, source in zip(changed, found, strict=True):
        if place > at:
            sources.append(range(at, place))
        sources.append(range(source, source + 1) if isinstance(source, int) else source)
        at = place + 1
    if at < chunks:
        sources.append(range(at, chunks))
    return sources


def _runs(found: list[Pieces | int]) -> list[Source]:
    """The sources of chunks at ``found`` (places in the last render, or pieces): places
    one after another make one run."""
    sources: list[Source] = []
    start = end = -1
    for source in found:
        if isinstance(source, int) and source == end:
            end += 1
            continue
        if end > start:
            sources.append(range(start, end))
        if isinstance(source, int):
            start, end = source, source + 1
        else:
            start = end = -1
            sources.append(source)
    if end > start:
        sources.append(range(start, end))
    return sources


def _unchanged(
    entries: dict[str, Entries], changed: list[int], found: list[Pieces | int]
) -> set[str]:
    """The metrics whose entries in every changed place are what was there (a chunk
    made again of the same values, or whose other metrics changed); none where a chunk
    moved."""
    if any(isinstance(source, int) for source in found):
        return set()
    pieces = [source for source in found if not isinstance(source, int)]
    kept = set()
    for name, made in entries.items():
        ends, view = made.ends, memoryview(made.pieces[0])
        if ends is not None and all(
            view[ends[place - 1] if place else 0 : ends[place]] == piece.get(name, b"")
            for place, piece in zip(changed, pieces, strict=True)
        ):
            kept.add(name)
    return kept


def _names(sources: list[Source]) -> set[str]:
    return {name for source in sources if not isinstance(source, range) for name in source}


def _assembled(
    entries: dict[str, Entries], sources: list[Source], names: Iterable[str]
) -> dict[str, Entries]:
    """The entries of ``names`` made of ``sources``: a run's bytes and ends from
    ``entries`` (none where it had none of a metric), a chunk's from its pieces."""
    return {name: _column(name, entries.get(name), sources) for name in names}


def _column(name: str, found: Entries | None, sources: list[Source]) -> Entries:
    last_ends = found.ends if found is not None else None
    view = memoryview(found.pieces[0] if found is not None else b"")
    runs: list[bytes | memoryview] = []
    ends: array[int] = array("q")
    at = 0
    for source in sources:
        if not isinstance(source, range):
            piece = source.get(name, b"")
            runs.append(piece)
            at += len(piece)
            ends.append(at)
        elif last_ends is None:  # none of the metric there
            ends.extend(array("q", [at]) * len(source))
        else:
            start = last_ends[source.start - 1] if source.start else 0
            end = last_ends[source.stop - 1]
            runs.append(view[start:end])
            kept, shift = last_ends[source.start : source.stop], at - start
            ends.extend(array("q", map(shift.__add__, kept)) if shift else kept)
            at += end - start
    body = b"".join(runs)
    return Entries(len(body), [body], ends)


def _concatenated(made: list[tuple[int, dict[str, Entries]]]) -> dict[str, Entries]:
    """Each metric's entries of several runs of chunks, one run after another."""
    names = {name for _, entries in made for name in entries}
    joined = {}
    for name in names:
        bodies: list[bytes] = []
        ends: array[int] = array("q")
        at = 0
        for count, entries in made:
            found = entries.get(name)
            if found is None or found.ends is None:
                ends.extend(array("q", [at]) * count)
                continue
            bodies.append(found.pieces[0])
            ends.extend(array("q", map(at.__add__, found.ends)) if at else found.ends)
            at += found.length
        body = b"".join(bodies)
        joined[name] = Entries(len(body), [body], ends)
    return joined


def _served(entries: dict[str, Entries]) -> dict[str, Entries]:
    """Those of any length: no family is served empty (one left out is made again from
    the chunks' pieces once a chunk has it again)."""
    return {name: found for name, found in entries.items() if found.length}
