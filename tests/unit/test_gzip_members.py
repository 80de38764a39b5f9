"""The protobuf body gzipped a family at a time: the members of the families that did
not change since the last render are kept; the body reads as the families joined."""

from __future__ import annotations

import gzip
import os
from typing import Any

import pytest
from isal import igzip

from pgq_exporter.exposition.columns import Entries
from pgq_exporter.exposition.families import Families, FamilyMessage
from pgq_exporter.exposition.snapshot import MEMBERS_FROM, GzipMembers


def _family(n: int, entries: bytes) -> FamilyMessage:
    return FamilyMessage(bytes([n]), f"header {n}".encode(), [Entries(len(entries), [entries])])


def _families(*sizes: int) -> Families:
    families = [_family(n, os.urandom(size)) for n, size in enumerate(sizes)]
    return Families(families, sum(len(b"".join(f.pieces())) for f in families))


def _body(families: Families) -> bytes:
    return b"".join(families.pieces())


def _compressed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    whole = igzip.compress

    def counted(data: bytes, *args: Any, **kwargs: Any) -> bytes:
        sizes.append(len(data))
        return whole(data, *args, **kwargs)

    monkeypatch.setattr(igzip, "compress", counted)
    return sizes


def test_only_the_families_that_changed_are_compressed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    members = GzipMembers()
    first = _families(MEMBERS_FROM // 2, MEMBERS_FROM // 2, 1000)
    compressed = _compressed(monkeypatch)
    body = members.body(first)
    assert gzip.decompress(body) == _body(first)
    assert len(compressed) == 3
    old = first.families
    changed = Families([old[0], _family(1, b"other"), old[2]], first.size)
    compressed.clear()
    again = members.body(changed)
    assert compressed == [len(b"\x01header 1other")]
    assert gzip.decompress(again) == _body(changed)


def test_a_small_body_is_one_member(monkeypatch: pytest.MonkeyPatch) -> None:
    compressed = _compressed(monkeypatch)
    small = _families(1000, 1000)
    body = GzipMembers().body(small)
    assert len(compressed) == 1
    assert gzip.decompress(body) == _body(small)
