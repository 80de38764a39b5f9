"""The protobuf body gzipped a family at a time: the members of the families that did
not change since the last render are kept; the body reads as the families joined."""

from __future__ import annotations

import gzip
import os
from typing import Any

import pytest
from isal import igzip

from pgq_exporter.exposition.part import Families
from pgq_exporter.exposition.snapshot import MEMBERS_FROM, GzipMembers


def _families(*sizes: int) -> Families:
    pieces = [
        [bytes([n]), f"header {n}".encode(), os.urandom(size)] for n, size in enumerate(sizes)
    ]
    return Families(pieces, sum(len(b"".join(p)) for p in pieces))


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
    assert gzip.decompress(body) == b"".join(b"".join(f) for f in first.pieces)
    assert len(compressed) == 3
    changed = Families([first.pieces[0], [b"\x01", b"header 1", b"other"], first.pieces[2]],
                       first.size)  # fmt: skip
    compressed.clear()
    again = members.body(changed)
    assert compressed == [len(b"\x01header 1other")]
    assert gzip.decompress(again) == b"".join(b"".join(f) for f in changed.pieces)


def test_a_small_body_is_one_member(monkeypatch: pytest.MonkeyPatch) -> None:
    compressed = _compressed(monkeypatch)
    small = _families(1000, 1000)
    body = GzipMembers().body(small)
    assert len(compressed) == 1
    assert gzip.decompress(body) == b"".join(b"".join(f) for f in small.pieces)
