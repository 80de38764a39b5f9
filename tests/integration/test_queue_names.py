"""The known queues bound as a text[] in binary: each list's array made once for each
kind of text a connection sends, and read back by the database as the names it has."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.types.array import ListBinaryDumper

from pgq_exporter.pg.connect import readable
from pgq_exporter.pg.queue_names import QueueNames
from tests.support import admin_execute, unique_name, with_dbname

ROUND_TRIP = (
    "SELECT q.name FROM unnest(%(queues)b::text[]) WITH ORDINALITY AS q(name, n) ORDER BY n"
)


def _dumps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    made: list[int] = []
    dump = ListBinaryDumper.dump

    def counted(self: ListBinaryDumper, obj: list[Any]) -> Any:
        made.append(len(obj))
        return dump(self, obj)

    monkeypatch.setattr(ListBinaryDumper, "dump", counted)
    return made


def test_queue_names_are_dumped_once_for_each_kind_of_text(
    server_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = unique_name("pgq_names")
    admin_execute(server_dsn, f"CREATE DATABASE \"{name}\" ENCODING 'SQL_ASCII' "
                              "LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")  # fmt: skip
    raw = b"\xe9t\xe9".decode("utf-8", "surrogateescape")  # not UTF-8: read as it came
    names = QueueNames(["a", "émail", "q" * 200])
    made = _dumps(monkeypatch)
    try:
        with psycopg.connect(server_dsn) as utf8:
            for _ in range(3):
                rows = utf8.execute(ROUND_TRIP, {"queues": names}).fetchall()
                assert [row[0] for row in rows] == names
            plain = ["a", "b"]  # a list not of known queues: dumped each time
            utf8.execute(ROUND_TRIP, {"queues": plain})
            utf8.execute(ROUND_TRIP, {"queues": plain})
        with readable(psycopg.connect(with_dbname(server_dsn, name))) as ascii_db:
            odd = QueueNames(["a", raw])
            for _ in range(2):
                rows = ascii_db.execute(ROUND_TRIP, {"queues": odd}).fetchall()
                assert [row[0] for row in rows] == ["a", raw]
                assert ascii_db.execute("SELECT %(queues)b::text[] = ARRAY['a', convert_from("
                                        "'\\xe974e9'::bytea, 'SQL_ASCII')]",
                                        {"queues": odd}).fetchone() == (True,)  # fmt: skip
            rows = ascii_db.execute(ROUND_TRIP, {"queues": names}).fetchall()
            assert [row[0] for row in rows] == names  # its own array for raw text
    finally:
        admin_execute(server_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert made == [3, 2, 2, 2, 3]
    assert len(names.dumped) == 2 and len(odd.dumped) == 1
