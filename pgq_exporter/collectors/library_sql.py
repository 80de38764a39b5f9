"""A library preset's named SQL blocks, rendered and run: the one place they are."""

from __future__ import annotations

from collections.abc import Mapping

import psycopg
from psycopg import sql

from pgq_exporter.collectors.rendering import Conn, Row
from pgq_exporter.presets.library import CAPPED, LibraryLayout

Caps = Mapping[str, int | None]  # state -> its LIMIT in the depth block (0: none given)


# {queues} as the exporter runs a block: the known queues, bound as a parameter, in
# binary (10,000 names: 2 ms where text took 6, for every query that reads them).
BOUND_QUEUES = sql.SQL("%(queues)b::text[]")
# {since} as the exporter runs a block: bound, so that the statement's text is the same
# at every run, and the connection keeps it prepared (pg.statements).
BOUND_SINCE = sql.SQL("%(since)s::float8")


def render_block(
    layout: LibraryLayout,
    block: str,
    for_queue: str | None = None,
    *,
    caps: Caps | None = None,
    stuck_cap: int | None = None,
    queues: sql.Composable = BOUND_QUEUES,
    **extra: sql.Composable,
) -> sql.Composed:
    """A named block of the preset's SQL file: its schema, parameters and caps quoted in
    as literals (``stuck_cap`` None: no limit), and, for a library with a table per
    queue, the tables and name of ``for_queue``."""
    text = layout.preset.blocks[block]
    parts: dict[str, sql.Composable] = {
        "schema": sql.Identifier(layout.schema),
        "queues": queues,
        "stuck_cap": sql.Literal(stuck_cap),
        **{f"{state}_cap": sql.Literal((caps or {}).get(state, 0)) for state in CAPPED},
        **{name: sql.Literal(value) for name, value in layout.params.items()},
    }
    if for_queue is not None:
        parts.update(layout.queue_tables(for_queue), queue=sql.Literal(for_queue))
    return sql.SQL(text).format(**{**parts, **extra})


def run_block(
    conn: Conn,
    layout: LibraryLayout,
    block: str,
    queues: list[str] | None,
    *,
    caps: Caps | None = None,
    stuck_cap: int | None = None,
    since: float | None = None,
) -> list[Row]:
    """The block's rows for ``queues`` (None: every queue the library has), and the
    jobs finished at or after ``since``: one statement, or, with a table per queue, one
    per queue that the library has."""
    bound = {} if since is None else {"since": since}

    def rendered(queue: str | None) -> sql.Composed:
        return render_block(layout, block, queue, caps=caps, stuck_cap=stuck_cap,
                            since=BOUND_SINCE)  # fmt: skip

    if not layout.preset.per_queue or block == "queues":
        return conn.execute(rendered(None), {"queues": queues or [], **bound}).fetchall()
    present = queue_names(conn, layout)
    known = set(present)
    wanted = present if queues is None else [queue for queue in queues if queue in known]
    # One statement a queue, sent in a pipeline: a round trip for all of them, not one
    # for each (pgmq's 1,000 queues: a read took 250 ms, most of it waiting).
    with conn.pipeline():
        cursors = [conn.execute(rendered(queue), bound or None) for queue in wanted]
    return [row for cursor in cursors for row in cursor.fetchall()]


def queue_names(conn: Conn, layout: LibraryLayout) -> list[str]:
    """The queues the library has (its queues block), or, for a role that may not read
    all it reads, those its queues_unfinished block finds, where it has one."""
    if "queues_unfinished" not in layout.preset.blocks:
        return [str(row[0]) for row in run_block(conn, layout, "queues", [])]
    try:
        with conn.transaction():  # a savepoint: the transaction outlives a refusal
            return [str(row[0]) for row in run_block(conn, layout, "queues", [])]
    except psycopg.errors.InsufficientPrivilege:
        return [str(row[0]) for row in run_block(conn, layout, "queues_unfinished", [])]


def plan_block(conn: Conn, layout: LibraryLayout, block: str) -> None:
    """Plan one block without running it: an error says the database does not match.
    With a table per queue, the blocks are planned on the first queue, if any."""
    queue: str | None = None
    if layout.preset.per_queue and block != "queues":
        queues = queue_names(conn, layout)
        if not queues:
            return
        queue = queues[0]
    statement = render_block(layout, block, queue, caps=dict.fromkeys(CAPPED, 1),
                             since=sql.Literal(0.0))  # fmt: skip
    conn.execute(sql.SQL("EXPLAIN {}").format(statement), {"queues": []})
