"""The registry of targets on a real server: retention by the clock, reloads that keep
what did not change, the server cap by normalised address, and what probes see."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from http import HTTPStatus
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgq_exporter.config import parse_config
from pgq_exporter.exposition import Form, Format
from pgq_exporter.http.probe import answer
from pgq_exporter.pg.embedded import EmbeddedPostgres
from pgq_exporter.queue.schema import apply_schema
from pgq_exporter.runtime.exporter import Exporter
from pgq_exporter.runtime.spec import Origin, TargetSpec
from pgq_exporter.samples import Sample
from tests.conftest import Database
from tests.support import admin_execute, unique_name, wait_for, with_dbname
from tests.support.exporter import parse_samples, probe, probe_status, value
from tests.support.fake_postgres import Tarpit
from tests.support.outages import pause, resume

FAST = "collectors:\n  defaults: {interval: 500ms, timeout: 500ms}\n"


def _exporter(text: str) -> Exporter:
    return Exporter(parse_config(text, "test.yaml", os.environ))


def _backends(dsn: str, database: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = 'pgq-exporter' AND datname = %s",
            (database,),
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_target_not_probed_is_stopped_by_the_clock_and_its_connections_closed(
    db: Database,
) -> None:
    exporter = _exporter(
        f"targets:\n  - name: t\n    dsn: {db.dsn!r}\nprobe: {{wait: 10s, idle: 1s}}\n{FAST}"
    )
    exporter.start()
    try:
        probe(exporter, "t")
        assert _backends(db.dsn, db.name) >= 1
        # No other probe comes: the clock alone stops it.
        wait_for(lambda: exporter.targets.running("t") is None, "the idle target to stop",
                 timeout=15)  # fmt: skip
        wait_for(lambda: _backends(db.dsn, db.name) == 0, "its connections to close")
        exporter.refresh()
        served = parse_samples(exporter.metrics_body.decode())
        # Its server's series went with it, and a config of targets alone still serves
        # the exporter's own metrics.
        assert "pgq_server_connections" not in served
        assert value(served, "pgq_probe_targets") == 0
        assert served["pgq_build_info"]
    finally:
        exporter.stop()


def _finish(db: Database, queue: str, jobs: int) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT pgq.enqueue(%s) FROM generate_series(1, %s)", (queue, jobs))
        conn.execute(
            "SELECT pgq.complete(c.id, c.lease_token)"
            " FROM pgq.claim(%s, %s, interval '30 seconds', 'test') AS c",
            (queue, jobs),
        )


def _completed(exporter: Exporter, database: str) -> float:
    target = exporter.targets.running(database)
    slot = target.slots.get("job_histograms") if target else None
    if slot is None:
        return -1.0  # not set up yet
    samples = slot.state.samples
    return sum(
        s.value for s in samples if isinstance(s, Sample) and s.metric == "pgq_jobs_completed_total"
    )


def _five(completed: float) -> bool:
    return completed == 5


def test_a_reload_that_changes_nothing_keeps_every_target_and_its_counters(
    db: Database, tmp_path: Path
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"databases:\n  - name: main\n    dsn: {db.dsn!r}\n"
        f"targets:\n  - name: t\n    dsn: {db.dsn!r}\nprobe: {{wait: 10s}}\n{FAST}"
    )
    from pgq_exporter.config import load_config  # noqa: PLC0415

    exporter = Exporter(load_config(path), config_path=str(path))
    exporter.start()
    try:
        probe(exporter, "t")
        _finish(db, "email", 5)
        for name in ("main", "t"):
            wait_for(partial(_completed, exporter, name), f"{name} to count 5 jobs", until=_five)
        before = {name: exporter.targets.running(name) for name in ("main", "t")}
        assert exporter.reload() == (True, "reloaded")
        for name, target in before.items():
            assert exporter.targets.running(name) is target, f"{name} was restarted"
            assert _completed(exporter, name) == 5
        # A changed interval restarts the targets, their counters carried over.
        path.write_text(path.read_text().replace("interval: 500ms", "interval: 600ms"))
        assert exporter.reload() == (True, "reloaded")
        for name, target in before.items():
            now = exporter.targets.running(name)
            assert now is not None and now is not target
            wait_for(partial(_completed, exporter, name), f"{name}'s counters", until=_five)
        _finish(db, "email", 2)
        wait_for(lambda: _completed(exporter, "main") == 7, "the restarted target to count on")
    finally:
        exporter.stop()


def test_the_server_cap_counts_one_server_however_its_port_is_spelt(db: Database) -> None:
    params = conninfo_to_dict(db.dsn)
    port = str(params.get("port") or "5432")
    other = make_conninfo(db.dsn, port="0" + port)  # libpq reads 05432 as 5432
    exporter = _exporter(
        f"databases:\n  - name: a\n    dsn: {db.dsn!r}\n  - name: b\n    dsn: {other!r}\n"
        f"limits: {{server_connections: 2}}\n{FAST}"
    )
    # What the exporter holds, by its own accounting: a place is taken before a
    # connection opens and given back only once it is closed, so this bounds the
    # connections open at any moment. (pg_stat_activity would not do: a backend whose
    # client has closed stays listed for a moment, beside the one that took its place.)
    seen: list[dict[str, int]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.002):
            seen.append(exporter.connections.open_per_server())

    watcher = threading.Thread(target=watch)
    watcher.start()
    exporter.start()
    try:
        for name in ("a", "b"):
            wait_for(partial(_all_succeeded, exporter, name), f"{name}'s collectors")
        # A lock on the queue table holds both queue groups' connections for their
        # timeout, while both catalog groups want one more each: more than the cap.
        with psycopg.connect(db.dsn) as locker:
            locker.execute("LOCK TABLE pgq.jobs IN ACCESS EXCLUSIVE MODE")
            wait_for(lambda: _waited_for_the_cap(exporter) or _peak(seen) > 2,
                     "a run to wait for the cap")  # fmt: skip
        exporter.refresh()
        served = parse_samples(exporter.metrics_body.decode())
    finally:
        stop.set()
        watcher.join()
        exporter.stop()
    # Four groups (a queue and a catalog group each) want four connections; the two
    # spellings are one server with a cap of 2, which they fill.
    assert all(len(sample) <= 1 for sample in seen), "two spellings counted as two servers"
    assert _peak(seen) == 2
    assert len(served["pgq_server_connections"]) == 1


def _peak(seen: list[dict[str, int]]) -> int:
    return max((count for sample in list(seen) for count in sample.values()), default=0)


def _waited_for_the_cap(exporter: Exporter) -> bool:
    return any(
        count and limit == "server_connections"
        for target in exporter.targets.static()
        for (limit, _), count in target.counts.items()
    )


def _all_succeeded(exporter: Exporter, name: str) -> bool:
    target = exporter.targets.running(name)
    return (
        target is not None
        and bool(target.slots)
        and all(slot.state.success for slot in target.slots.values())
    )


@pytest.fixture
def refusing(server_dsn: str, template_db: str) -> Iterator[tuple[str, str, str]]:
    """A role that may connect to one database of two: (its DSN, open db, closed db)."""
    role, password = unique_name("fleet"), "Rf7-pw"
    opened, closed = unique_name("open"), unique_name("closed")
    for name in (opened, closed):
        admin_execute(server_dsn, f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
        admin_execute(server_dsn, f'REVOKE CONNECT ON DATABASE "{name}" FROM PUBLIC')
    admin_execute(server_dsn, f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{password}'")
    admin_execute(server_dsn, f'GRANT CONNECT ON DATABASE "{opened}" TO "{role}"')
    admin_execute(with_dbname(server_dsn, opened), f'GRANT USAGE ON SCHEMA pgq TO "{role}"')
    admin_execute(with_dbname(server_dsn, opened),
                  f'GRANT SELECT ON ALL TABLES IN SCHEMA pgq TO "{role}"')  # fmt: skip
    dsn = make_conninfo(with_dbname(server_dsn, opened), user=role, password=password)
    try:
        yield dsn, opened, closed
    finally:
        for name in (opened, closed):
            admin_execute(server_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin_execute(server_dsn, f'DROP ROLE IF EXISTS "{role}"')


def test_a_discovered_database_that_refuses_connections_answers_down_with_a_reason(
    refusing: tuple[str, str, str],
) -> None:
    dsn, opened, closed = refusing
    exporter = _exporter(
        f"discover:\n  - name: fleet\n    dsn: {dsn!r}\n"
        f"    include: ['{opened}', '{closed}']\nprobe: {{wait: 10s}}\n{FAST}"
    )
    exporter.start()
    try:
        wait_for(lambda: len(exporter.targets.known()) == 2, "both databases listed")
        healthy = probe(exporter, f"fleet/{opened}")
        assert value(healthy, "pgq_up", database=f"fleet/{opened}") == 1
        reply = answer(exporter.targets, exporter.config, {"target": [f"fleet/{closed}"]}, None)
        assert reply.status == HTTPStatus.OK and reply.snapshot is not None
        down = parse_samples(reply.snapshot.body().decode())
        assert value(down, "pgq_up", database=f"fleet/{closed}") == 0
        assert reply.reason and "permission denied" in reply.reason
        assert "Rf7-pw" not in reply.reason
    finally:
        exporter.stop()


def test_past_max_targets_a_new_target_is_refused_and_counted(db: Database) -> None:
    exporter = _exporter(
        f"targets:\n  - name: a\n    dsn: {db.dsn!r}\n  - name: b\n    dsn: {db.dsn!r}\n"
        f"probe: {{wait: 10s, max_targets: 1}}\n{FAST}"
    )
    exporter.start()
    try:
        probe(exporter, "a")
        assert probe_status(exporter, "b") == HTTPStatus.SERVICE_UNAVAILABLE
        assert probe_status(exporter, "a") == HTTPStatus.OK  # a running one still answers
        exporter.refresh()
        served = parse_samples(exporter.metrics_body.decode())
        assert value(served, "pgq_probe_refused_total") == 1
        assert value(served, "pgq_probe_targets") == 1
    finally:
        exporter.stop()


def test_debug_shows_the_layout_each_collectors_last_run_and_no_secret(db: Database) -> None:
    secret_dsn = make_conninfo(db.dsn, password="Dbg-s3cret")
    exporter = _exporter(
        f"targets:\n  - name: t\n    dsn: {db.dsn!r}\n    preset: auto\n"
        f"  - name: down\n    dsn: 'host=127.0.0.1 port=1 user=u password=Dbg-s3cret'\n"
        f"  - name: s\n    dsn: {secret_dsn!r}\nprobe: {{wait: 10s}}\n{FAST}"
    )
    exporter.start()
    try:
        probe(exporter, "t")
        params = {"target": ["t"], "debug": ["true"]}
        text = answer(exporter.targets, exporter.config, params, None).text
        assert "layout: preset pgq, table pgq.jobs" in text
        assert "queue_depth: ok; last run" in text and "every 0.5s" in text
        params = {"target": ["down"], "debug": ["true"]}
        down = answer(exporter.targets, exporter.config, params, None).text
        assert "database: down" in down and "Dbg-s3cret" not in down
    finally:
        exporter.stop()


def test_a_first_probe_waits_no_longer_than_the_scrape_allows() -> None:
    with Tarpit() as tarpit:
        exporter = _exporter(
            f"targets:\n  - name: slow\n    dsn: 'host=127.0.0.1 port={tarpit.port} user=u'\n"
            f"probe: {{wait: 20s}}\n{FAST}"
        )
        exporter.start()
        try:
            began = time.monotonic()
            reply = answer(exporter.targets, exporter.config, {"target": ["slow"]}, "1.5")
            took = time.monotonic() - began
        finally:
            exporter.stop()
    assert reply.reason == "no collection within 1s"
    assert took < 5, took  # probe.wait alone would be 20 s


def test_once_the_database_answers_again_no_group_waits_out_its_backoff() -> None:
    """Failures in a row put a target's next tries off (up to 30 s); the first run that
    reaches the database again brings its other groups' runs forward, so that no
    collector serves the outage's failure for the rest of the backoff."""
    with EmbeddedPostgres(prefix="pgq-backoff-", durable=False) as server:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            apply_schema(conn, "pgq")
        exporter = _exporter(f"databases:\n  - name: main\n    dsn: {server.dsn!r}\n{FAST}")
        exporter.start()
        try:
            wait_for(partial(_all_succeeded, exporter, "main"), "every collector to succeed",
                     until=bool)  # fmt: skip
            target = exporter.targets.running("main")
            assert target is not None and len(target.slots) > 1

            def furthest() -> float:
                assert target is not None
                return max(slot.due for slot in target.slots.values()) - time.monotonic()

            pause(server)
            wait_for(furthest, "failures to put a retry off by more than 4 s", timeout=60,
                     until=lambda ahead: ahead > 4)  # fmt: skip
            resume(server)
            wait_for(lambda: target.up, "the database to answer again", timeout=60, until=bool,
                     interval=0.01)  # fmt: skip
            ahead = furthest()
        finally:
            exporter.stop()
    # Every run is due within the interval (500 ms), none at the end of the backoff.
    assert ahead <= 0.5, ahead


def test_a_group_that_ends_while_another_waits_on_a_lock_is_served_at_once(db: Database) -> None:
    """A target's groups render once when they end together; one that ends while another
    still waits (here its queue group, on a lock on the queue table, for up to its 30 s
    timeout) is in the target's snapshot within a fraction of a second, not when the
    other ends."""
    with db.connect() as holder:
        holder.execute("LOCK TABLE pgq.jobs IN ACCESS EXCLUSIVE MODE")
        exporter = _exporter(
            f"targets:\n  - name: t\n    dsn: {db.dsn!r}\nprobe: {{wait: 1s}}\n"
            "collectors:\n  defaults: {interval: 30s, timeout: 30s}\n"
            "  activity: {interval: 1s, timeout: 1s}\n"
        )
        exporter.start()
        try:
            target = exporter.targets.probe(exporter.targets.spec("t"))

            def waiting_queue_group_seen() -> bool:
                # The queue group's own wait, seen by activity's runs while it waits.
                served = parse_samples(target.snapshot.body().decode())
                waits = served.get("pgq_lock_waits", {}).values()  # a partition's, here
                return any(v >= 1 for v in waits) and "queue_depth" in target.running()

            wait_for(waiting_queue_group_seen,
                     "the queue group's lock wait served while it waits", timeout=10)  # fmt: skip
        finally:
            exporter.stop()
            holder.rollback()


def test_one_address_probed_through_two_modules_runs_two_steady_targets(db: Database) -> None:
    """A target's identity includes its module: probing the address through the second
    module neither stops nor restarts the first one's target, and both collect."""
    exporter = _exporter(
        "auth_modules:\n"
        "  a: {dsn: 'user=x', hosts: ['db.internal']}\n"
        "  b: {dsn: 'user=y', hosts: ['db.internal']}\n"
        f"probe: {{wait: 10s}}\n{FAST}"
    )
    name = "db.internal:5432/app"
    base = exporter.config.auth_modules["a"].template
    specs = {
        module: TargetSpec(replace(base, name=name, dsn=db.dsn), Origin.MODULE, module)
        for module in ("a", "b")
    }
    exporter.start()
    try:
        first = {module: exporter.targets.probe(spec) for module, spec in specs.items()}
        for _ in range(4):
            for module, spec in specs.items():
                assert exporter.targets.probe(spec) is first[module], module
        for target in first.values():
            assert target.first_collection.wait(10)
            assert target.up is True and not target.stopped
        assert first["a"] is not first["b"]
        assert exporter.targets.running(name, "a") is first["a"]
    finally:
        exporter.stop()


def test_a_first_probe_is_rendered_in_the_scrapers_form_before_it_is_answered(
    db: Database,
) -> None:
    """The first probe's snapshot comes made, gzipped, by the target's render: the request
    thread only writes it out."""
    gzipped = Form(Format.TEXT, True)
    exporter = _exporter(f"targets:\n  - name: t\n    dsn: {db.dsn!r}\nprobe: {{wait: 10s}}\n")
    exporter.start()
    try:
        reply = answer(exporter.targets, exporter.config, {"target": ["t"]}, None, form=gzipped)
        assert reply.status == HTTPStatus.OK and reply.snapshot is not None
        assert gzipped in reply.snapshot.rendered()
    finally:
        exporter.stop()


def test_a_listed_database_is_merged_into_metrics_without_a_snapshot_of_its_own(
    db: Database,
) -> None:
    exporter = _exporter(f"databases:\n  - name: main\n    dsn: {db.dsn!r}\n{FAST}")
    try:
        served = parse_samples(exporter.collect_once().decode())
        target = exporter.targets.running("main")
        assert target is not None and target.first_collection.is_set()
        assert parse_samples(target.snapshot.body().decode()) == {}
        assert value(served, "pgq_up", database="main") == 1
    finally:
        exporter.stop()
