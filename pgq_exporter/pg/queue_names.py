"""The known queues as every per-queue query binds them (``%(queues)b``, a text[] in
binary): the same list object while the queues are the same, its array made once for
each kind of text a connection sends (UTF-8, or a SQL_ASCII database's raw bytes),
then sent as made. Each queue collector binds the list on every run: 10,000 names
took 2-4 ms to dump each time, five times a cycle."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.abc import Buffer
from psycopg.types.array import ListBinaryDumper


class QueueNames(list[str]):
    """Queue names, never changed once made: a new list is made when they change."""

    __slots__ = ("_as_set", "dumped")

    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.dumped: dict[type, bytes] = {}  # by the text dumper of its items
        self._as_set: frozenset[str] | None = None

    @property
    def as_set(self) -> frozenset[str]:
        """The names as a set, made once: each collector looks names up in it."""
        if self._as_set is None:
            self._as_set = frozenset(self)
        return self._as_set


class _QueueNamesBinaryDumper(ListBinaryDumper):
    def dump(self, obj: list[Any]) -> Buffer | None:
        if not isinstance(obj, QueueNames):
            return super().dump(obj)
        kind = type(self.sub_dumper)
        found = obj.dumped.get(kind)
        if found is None:
            made = super().dump(obj)
            found = obj.dumped[kind] = bytes(made) if made is not None else b""
        return found


psycopg.adapters.register_dumper(QueueNames, _QueueNamesBinaryDumper)
