"""Archive and retention: move old finished jobs into the archive, drop old archive partitions.

The archive has one partition per UTC day, named ``jobs_archive_YYYYMMDD``.
Moving happens in batches of one atomic statement each (DELETE … RETURNING
feeding the INSERT), so a row is never in both tables or in neither, and two
copies running at once skip each other's rows. Old partitions are detached
CONCURRENTLY (the archive has no DEFAULT partition, which that needs) and
dropped; an interrupted detach is finalised on the next run.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, TextIO

from psycopg import sql

from pgq_exporter.pg.connect import connection
from pgq_exporter.queue.contract import Conn
from pgq_exporter.queue.sql import query

_FILE = "maintenance.sql"
_PARTITION = re.compile(r"^jobs_archive_(\d{8})$")


@dataclass(frozen=True, slots=True)
class MaintenanceSettings:
    retention: timedelta = timedelta(days=7)
    archive_retention: timedelta = timedelta(days=90)
    batch: int = 5000
    premake_days: int = 7


@dataclass
class MaintenanceReport:
    created: list[str] = field(default_factory=list)
    moved: int = 0
    dropped: list[str] = field(default_factory=list)
    skipped_retention: bool = False

    def describe(self) -> str:
        parts = [f"moved {self.moved} finished job(s) to the archive"]
        if self.created:
            parts.append(f"created {len(self.created)} archive partition(s)")
        if self.dropped:
            parts.append(f"dropped {', '.join(self.dropped)}")
        if self.skipped_retention:
            parts.append("left partition retention to another running copy")
        return "; ".join(parts)


Progress = Callable[[int, int], None]


def partition_name(day: date) -> str:
    return f"jobs_archive_{day:%Y%m%d}"


def _statement(name: str, schema: str) -> sql.Composed:
    return sql.SQL(query(_FILE, name)).format(
        jobs=sql.Identifier(schema, "jobs"), archive=sql.Identifier(schema, "jobs_archive")
    )


class Maintenance:
    def __init__(self, dsn: str, schema: str, settings: MaintenanceSettings) -> None:
        self.dsn = dsn
        self.schema = schema
        self.settings = settings

    def run(self, progress: Progress | None = None) -> MaintenanceReport:
        report = MaintenanceReport()
        with connection(self.dsn, application_name="pgq-maintenance") as conn:
            cutoff = _now(conn) - self.settings.retention
            queues = self._finished_queues(conn)
            report.created = self.ensure_partitions(conn, queues)
            report.moved = self.move(conn, queues, cutoff, progress)
            report.dropped, report.skipped_retention = self.drop_expired(conn)
        return report

    def _finished_queues(self, conn: Conn) -> list[str]:
        statement = _statement("finished_queues", self.schema)
        return [row[0] for row in conn.execute(statement).fetchall()]

    def ensure_partitions(self, conn: Conn, queues: list[str]) -> list[str]:
        """A partition for every day from the oldest finished job to a few days ahead."""
        today = _now(conn).date()
        oldest = today
        for queue in queues:
            row = conn.execute(
                _statement("oldest_finished", self.schema), {"queue": queue}
            ).fetchone()
            if row and row[0] is not None:
                oldest = min(oldest, row[0].astimezone(UTC).date())
        created = []
        with conn.transaction():
            conn.execute(query(_FILE, "lock_partitions"), {"schema": self.schema})
            existing = set(self._partitions(conn))
            day = oldest
            while day <= today + timedelta(days=self.settings.premake_days):
                name = partition_name(day)
                if name not in existing:
                    conn.execute(
                        sql.SQL(
                            "CREATE TABLE {} PARTITION OF {} FOR VALUES FROM ({}) TO ({})"
                        ).format(
                            sql.Identifier(self.schema, name),
                            sql.Identifier(self.schema, "jobs_archive"),
                            sql.Literal(f"{day.isoformat()} 00:00:00+00"),
                            sql.Literal(f"{(day + timedelta(days=1)).isoformat()} 00:00:00+00"),
                        )
                    )
                    created.append(name)
                day += timedelta(days=1)
        return created

    def move(
        self, conn: Conn, queues: list[str], cutoff: datetime, progress: Progress | None
    ) -> int:
        total = 0
        if progress is not None:
            statement = _statement("due_rows", self.schema)
            for queue in queues:
                row = conn.execute(statement, {"queue": queue, "cutoff": cutoff}).fetchone()
                total += int(row[0]) if row else 0
        moved = 0
        batch = _statement("move_batch", self.schema)
        for queue in queues:
            while True:
                params = {"queue": queue, "cutoff": cutoff, "batch": self.settings.batch}
                rows = conn.execute(batch, params).rowcount
                moved += max(rows, 0)
                if progress is not None:
                    progress(moved, max(total, moved))
                if rows < self.settings.batch:
                    break
        return moved

    def drop_expired(self, conn: Conn) -> tuple[list[str], bool]:
        row = conn.execute(query(_FILE, "try_lock_retention"), {"schema": self.schema}).fetchone()
        if not row or not row[0]:
            return [], True
        try:
            dropped = []
            limit = _now(conn).date() - self.settings.archive_retention
            for name, pending in self._partitions(conn).items():
                match = _PARTITION.match(name)
                if not match:
                    continue
                day = datetime.strptime(match.group(1), "%Y%m%d").replace(tzinfo=UTC).date()
                if day + timedelta(days=1) > limit:
                    continue
                mode = sql.SQL("FINALIZE") if pending else sql.SQL("CONCURRENTLY")
                conn.execute(
                    sql.SQL("ALTER TABLE {} DETACH PARTITION {} {}").format(
                        sql.Identifier(self.schema, "jobs_archive"),
                        sql.Identifier(self.schema, name),
                        mode,
                    )
                )
                conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(self.schema, name)))
                dropped.append(name)
            return dropped, False
        finally:
            conn.execute(query(_FILE, "unlock_retention"), {"schema": self.schema})

    def _partitions(self, conn: Conn) -> dict[str, bool]:
        rows = conn.execute(query(_FILE, "archive_partitions"), {"schema": self.schema}).fetchall()
        return {str(name): bool(pending) for name, pending in rows}


def _now(conn: Conn) -> datetime:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    value: Any = row[0]
    return value.astimezone(UTC)  # type: ignore[no-any-return]


class TerminalProgress:
    """Rows moved, rate and time left, redrawn on one terminal line."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.started = time.monotonic()

    def __call__(self, moved: int, total: int) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = moved / elapsed
        left = (total - moved) / rate if rate > 0 else 0.0
        self.stream.write(
            f"\rmoved {moved:,} / {total:,} rows  {rate:,.0f} rows/s  "
            f"{int(left // 60)}:{int(left % 60):02d} left "
        )
        self.stream.flush()

    def done(self) -> None:
        self.stream.write("\n")
        self.stream.flush()
