"""Many queues of few jobs each, read in one pass of an index, serve what a probe of
each queue serves: the reference schema's kept counts choose the read, by the pending
and processing jobs a queue (queue_latency.py, queue_leases.py, queue_depth.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from pgq_exporter.collectors import base, kept, queue_depth, queue_latency, queue_leases
from pgq_exporter.collectors.rendering import render
from pgq_exporter.config import SchemaMapping
from pgq_exporter.queue.admin import add_queue
from tests.conftest import Database
from tests.support.exporter import Samples, basic_config, collect_once

Conn = psycopg.Connection[Any]

# max_queues 5: the first five queues in name order are served, zz_left_out is not.
CONFIG_EXTRA = "max_queues: 5\nhistograms: {wait_thresholds: [30s, 5m, 1h]}\n"
READS = ("ready_in_one_pass", "expired_in_one_pass", "oldest_ready_late", "expired_leases")
DEPTH = "delayed_by_tick"
# The reads of depth's statement: the current tick's delayed jobs in a pass or probed.
DEPTH_READS = (f"{DEPTH} in one pass", f"{DEPTH} probed")
MODULES = (queue_latency, queue_leases, queue_depth)
PROCESSING = (
    "INSERT INTO jobs (queue, status, attempts, max_attempts, started_at, locked_until,"
    " lease_token) SELECT %(queue)s, 'processing', CASE WHEN n %% 3 = 0 THEN 3 ELSE 1 END, 3,"
    " now(), now() + %(lease)s::interval, gen_random_uuid() FROM generate_series(1, %(n)s) n"
)
SERVED = (
    "pgq_queue_oldest_ready_age_seconds",
    "pgq_queue_late_ready_jobs",
    "pgq_queue_stuck_jobs",
    "pgq_queue_exhausted_jobs",
    "pgq_queue_lease_count_approximate",
    "pgq_queue_jobs",
    "pgq_queue_ready_jobs",
    "pgq_queue_delayed_jobs",
)


def _enqueue(conn: Conn, queue: str, n: int, ago: str) -> None:
    conn.execute(
        "SELECT count(*) FROM enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]), -%s::interval)",
        (queue, n, ago),
    )


def _fill(conn: Conn) -> None:
    for queue, batches in (
        ("mail", (("2 hours", 2), ("10 minutes", 3), ("1 minute", 2), ("0", 4), ("-1 hour", 2))),
        ("fresh", (("0", 3),)),
        ("later", (("-1 hour", 2),)),
        ("zz_left_out", (("2 hours", 5),)),
    ):
        for ago, n in batches:
            _enqueue(conn, queue, n, ago)
    for queue, expired, live in (("leased", 5, 3), ("mail", 0, 2), ("zz_left_out", 4, 0)):
        conn.execute(PROCESSING, {"queue": queue, "n": expired, "lease": "-1 minute"})
        conn.execute(PROCESSING, {"queue": queue, "n": live, "lease": "1 hour"})
    _enqueue(conn, "idle", 1, "0")
    conn.execute("UPDATE jobs SET status = 'done', finished_at = now() WHERE queue = 'idle'")


def _collected(
    dsn: str, monkeypatch: pytest.MonkeyPatch, read_whole: int | None = None
) -> tuple[Samples, list[str]]:
    """One collection, with READ_WHOLE_PER_QUEUE set (None: as it is), and the reads
    the two collectors made."""
    ran: list[str] = []
    for module in MODULES:
        if read_whole is not None:
            monkeypatch.setattr(module, "READ_WHOLE_PER_QUEUE", read_whole)
        monkeypatch.setattr(module, "fetch", _recording(module.fetch, ran))
    samples = collect_once(basic_config(dsn, extra=CONFIG_EXTRA))
    monkeypatch.undo()
    return samples, [name for name in ran if name in READS or name in DEPTH_READS]


def _recording(fetch: Callable[..., Any], ran: list[str]) -> Callable[..., Any]:
    def recorded(conn: Conn, name: str, ctx: Any, params: Any = None, *args: Any) -> Any:
        if name == DEPTH:
            ran.append(f"{DEPTH} {'in one pass' if params['one_pass'] else 'probed'}")
        else:
            ran.append(name)
        return fetch(conn, name, ctx, params, *args)

    return recorded


def _served(samples: Samples) -> dict[str, dict[Any, float]]:
    return {name: samples[name] for name in SERVED}


def test_one_pass_and_probes_serve_the_same_figures(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(db.dsn, autocommit=True) as admin:  # a pass reads every partition
        add_queue(admin, "pgq", "mail")
        add_queue(admin, "pgq", "leased")
    with db.connect(autocommit=True) as conn:
        _fill(conn)
        [(tables,)] = conn.execute("SELECT count(DISTINCT tableoid) FROM pgq.jobs").fetchall()
    assert tables == 3  # the default partition and the two queues'
    whole, whole_reads = _collected(db.dsn, monkeypatch, read_whole=1_000_000)
    probed, probed_reads = _collected(db.dsn, monkeypatch, read_whole=0)
    assert whole_reads == [f"{DEPTH} in one pass", "ready_in_one_pass", "expired_in_one_pass"]
    assert probed_reads == [f"{DEPTH} probed", "oldest_ready_late", "expired_leases"]
    ages = "pgq_queue_oldest_ready_age_seconds"
    for labels, age in probed[ages].items():  # a second or two apart
        assert whole[ages][labels] == pytest.approx(age, abs=5), labels
    assert whole[ages].keys() == probed[ages].keys()
    assert {k: v for k, v in _served(whole).items() if k != ages} == {
        k: v for k, v in _served(probed).items() if k != ages
    }
    mail = {("database", "main"), ("queue", "mail")}
    late = {dict(labels)["threshold"]: n for labels, n in whole["pgq_queue_late_ready_jobs"].items()
            if mail <= labels}  # fmt: skip
    assert late == {"30": 7, "300": 5, "3600": 2}
    assert whole[ages][frozenset(mail)] == pytest.approx(7200, abs=60)
    assert whole[ages][frozenset({("database", "main"), ("queue", "later")})] == 0
    leased = frozenset({("database", "main"), ("queue", "leased")})
    assert (whole["pgq_queue_stuck_jobs"][leased], whole["pgq_queue_exhausted_jobs"][leased]) == (
        4, 1)  # fmt: skip
    assert not any(("queue", "zz_left_out") in labels for labels in whole[ages])


def test_the_kept_counts_choose_the_read_by_the_jobs_a_queue(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most READ_WHOLE_PER_QUEUE pending (or processing) jobs a queue on average:
    one pass; more, a probe a queue."""
    with db.connect(autocommit=True) as conn:
        _enqueue(conn, "mail", queue_latency.READ_WHOLE_PER_QUEUE, "1 minute")
        conn.execute(PROCESSING, {"queue": "mail", "n": queue_leases.READ_WHOLE_PER_QUEUE,
                                  "lease": "-1 minute"})  # fmt: skip
        _, reads = _collected(db.dsn, monkeypatch)
        assert reads == [f"{DEPTH} in one pass", "ready_in_one_pass", "expired_in_one_pass"]
        _enqueue(conn, "mail", 1, "0")
        conn.execute(PROCESSING, {"queue": "mail", "n": 1, "lease": "1 hour"})
        samples, reads = _collected(db.dsn, monkeypatch)
        assert reads == [f"{DEPTH} in one pass", "oldest_ready_late", "expired_leases"]
        mail = frozenset({("database", "main"), ("queue", "mail")})
        assert samples["pgq_queue_stuck_jobs"][mail] == 2  # the two expired leases
        # Depth's pass reads fewer fields an entry: its bound is higher.
        pending = samples["pgq_queue_jobs"][frozenset({*mail, ("status", "pending")})]
        _enqueue(conn, "mail", queue_depth.READ_WHOLE_PER_QUEUE - int(pending), "0")
        _, reads = _collected(db.dsn, monkeypatch)
        assert reads[0] == f"{DEPTH} in one pass"
        _enqueue(conn, "mail", 1, "0")
        _, reads = _collected(db.dsn, monkeypatch)
    assert reads[0] == f"{DEPTH} probed"


def test_the_current_ticks_delayed_jobs_count_alike_in_one_pass_and_probed(db: Database) -> None:
    """Jobs due later within the current ten-second tick are not in the kept ticks:
    the pass and the probes count them alike, in one transaction (one now())."""
    tick_end = "to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10)"
    statement = render(DEPTH, SchemaMapping())
    with db.connect() as conn, conn.transaction():
        _fill(conn)
        conn.execute(f"INSERT INTO jobs (queue, scheduled_at) SELECT q, {tick_end}"
                     " - interval '1 millisecond' FROM unnest(ARRAY['mail', 'mail', 'fresh']) q")  # fmt: skip
        params: dict[str, Any] = {"cap": 1001, "queues": ["fresh", "later", "mail"]}
        passed = sorted(conn.execute(statement, {**params, "one_pass": True}).fetchall())
        probed = sorted(conn.execute(statement, {**params, "one_pass": False}).fetchall())
    assert passed == probed
    # queue, delayed in later ticks, delayed in the current tick
    assert passed == [("fresh", 0, 1), ("later", 2, 0), ("mail", 2, 2)]


def test_a_runs_collectors_read_the_kept_counts_once(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the schema keeps counts, their sums, and their sums by queue are read
    once a run, however many of its collectors ask (three, two, and three of them with
    the discovery)."""
    with db.connect(autocommit=True) as conn:
        _fill(conn)
    calls: list[str] = []
    for module, name in ((base, "kept_tables"), (base, "kept_unfinished"), (kept, "_read")):
        monkeypatch.setattr(module, name, _counting(getattr(module, name), name, calls))
    samples = collect_once(basic_config(db.dsn, extra=CONFIG_EXTRA))
    assert sorted(calls) == ["_read", "kept_tables", "kept_unfinished"]
    mail = frozenset({("database", "main"), ("queue", "mail")})
    # From the one read: 13 enqueued, 2 inserted as processing.
    assert samples["pgq_jobs_enqueued_total"][mail] == 15


def _counting(read: Callable[..., Any], name: str, calls: list[str]) -> Callable[..., Any]:
    def counted(*args: Any) -> Any:
        calls.append(name)
        return read(*args)

    return counted
