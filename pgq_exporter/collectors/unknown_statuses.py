"""Status values a library's enum holds that its preset does not count: a library
upgrade can add one (`ALTER TYPE ... ADD VALUE`). Its jobs are counted under the status
"unknown" of pgq_queue_jobs, and said once in the log, rather than left out of every
count."""

from __future__ import annotations

import logging

from psycopg import sql

from pgq_exporter.collectors.rendering import NO_TABLE, Conn, render
from pgq_exporter.presets.library import LibraryLayout

log = logging.getLogger("pgq_exporter.collectors")

UNKNOWN = "unknown"


def unknown_values(conn: Conn, layout: LibraryLayout) -> tuple[str, ...]:
    """The values of the preset's status type that its blocks do not count."""
    preset = layout.preset
    if not preset.status_enum:
        return ()
    params = {"schema": layout.schema, "type": preset.status_enum}
    labels = [str(row[0]) for row in conn.execute(render("enum_labels", NO_TABLE), params)]
    return tuple(label for label in labels if label not in preset.known_statuses)


class UnknownStatuses:
    """One target's look at its library's status values, and the jobs in those unknown."""

    def __init__(self) -> None:
        self._values: tuple[str, ...] = ()

    def counts(
        self, conn: Conn, layout: LibraryLayout, queues: list[str], database: str, cap: int
    ) -> dict[str, int]:
        """Per queue, the jobs in a status the preset does not know (up to cap + 1);
        nothing when the library has none. The type's values are read at every run (a
        few rows of the catalog): one it gains is counted at the next."""
        values = unknown_values(conn, layout)
        if values and values != self._values:
            log.warning(
                "status values the preset does not know: their jobs are counted as "
                'status="unknown"',
                extra={"database": database, "preset": layout.preset.name,
                       "values": ", ".join(values)},
            )  # fmt: skip
        self._values = values
        if not self._values or not layout.preset.status_table:
            return {}
        table, queue_column, status_column = layout.preset.status_table
        statement = render(
            "unknown_status_counts", NO_TABLE, table=sql.Identifier(layout.schema, table),
            queue_column=sql.Identifier(queue_column), status_column=sql.Identifier(status_column),
        )  # fmt: skip
        params = {"values": list(self._values), "limit": cap + 1, "queues": queues}
        return {str(queue): int(n) for queue, n in conn.execute(statement, params).fetchall()}
