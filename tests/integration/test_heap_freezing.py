"""`serve` freezes the heap after each collector's run (and each scheduled job): what a
collector keeps until its next run is then walked by no young collection of the
collectors after it."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import pytest

from pgq_exporter.config import parse_config
from pgq_exporter.runtime import collection
from pgq_exporter.runtime.exporter import Exporter
from pgq_exporter.runtime.memory import HeapFreezer
from tests.conftest import Database
from tests.support.exporter import basic_config, parse_samples, value


class _Counted(HeapFreezer):
    def __init__(self) -> None:
        super().__init__(thaw_every=3600)
        self.enabled = True
        self.calls = 0

    def after_job(self) -> None:
        self.calls += 1
        super().after_job()


@pytest.fixture
def freezer(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Counted]:
    counted = _Counted()
    monkeypatch.setattr(collection, "FREEZER", counted)
    yield counted
    gc.unfreeze()


def test_each_collector_run_ends_in_a_freeze_and_serves_what_it_read(
    db: Database, freezer: _Counted
) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue('frozen', '{}'::jsonb)")
    exporter = Exporter(parse_config(basic_config(db.dsn), "test.yaml", os.environ))
    try:
        body = exporter.collect_once().decode()
        slots = [slot for t in exporter.targets.static() for slot in t.slots.values()]
        assert all(slot.state.ran for slot in slots)
        assert freezer.calls == len(slots)
        assert gc.get_freeze_count() > 0
        samples = parse_samples(body)
        assert value(samples, "pgq_queue_jobs", database="main", queue="frozen",
                     status="pending") == 1  # fmt: skip
    finally:
        exporter.stop()
