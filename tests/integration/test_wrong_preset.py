"""A preset that does not match the database fails its queue collectors only: the
collectors that read the catalog and statistics (tables, horizons, activity) go on."""

from __future__ import annotations

import pytest

from pgq_exporter.presets.library import LIBRARY_PRESETS
from tests.conftest import Database
from tests.support.exporter import collect_once, value

CATALOG_COLLECTORS = ("table_health", "xmin_horizon", "activity")


@pytest.mark.parametrize("preset", sorted(LIBRARY_PRESETS))
def test_the_catalog_collectors_succeed_beside_a_preset_the_database_lacks(
    empty_db: Database, preset: str
) -> None:
    samples = collect_once(
        f"databases:\n  - name: main\n    dsn: {empty_db.dsn!r}\n    preset: {preset}\n"
        "    schema: public\n"
    )
    for collector in CATALOG_COLLECTORS:
        assert value(samples, "pgq_collector_success", database="main", collector=collector) == 1
    assert value(samples, "pgq_collector_success", database="main", collector="queue_depth") == 0
