"""A protobuf body past a megabyte, gzipped a family at a time (GzipMembers), as a real
Prometheus with native histograms scrapes it: every series read, none lost between
two members."""

from __future__ import annotations

import gzip
import tempfile
import urllib.request
import zlib
from pathlib import Path

import pytest

from pgq_exporter.exposition.protobuf import CONTENT_TYPE
from pgq_exporter.exposition.snapshot import MEMBERS_FROM
from tests.conftest import Database
from tests.support.exporter import ExporterProcess, basic_config
from tests.support.exposition import read_delimited
from tests.support.prometheus import running_prometheus

pytestmark = pytest.mark.prometheus

QUEUES = 800  # about 35 series and 2.3 kB of protobuf each


def _members(body: bytes) -> int:
    """How many gzip members ``body`` is."""
    count = 0
    while body:
        inflate = zlib.decompressobj(wbits=31)
        inflate.decompress(body)
        body, count = inflate.unused_data, count + 1
    return count


def test_prometheus_reads_every_series_of_a_body_gzipped_a_family_at_a_time(
    db: Database,
) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (queue, payload) SELECT 'q' || lpad(n::text, 4, '0'), '{}'"
            " FROM generate_series(1, %s) AS n",
            (QUEUES,),
        )
    config = basic_config(db.dsn, extra=f"max_queues: {2 * QUEUES}\n")
    with tempfile.TemporaryDirectory() as tmp, ExporterProcess(config) as exporter:
        url = f"http://127.0.0.1:{exporter.port}/metrics"
        request = urllib.request.Request(
            url, headers={"Accept": CONTENT_TYPE, "Accept-Encoding": "gzip"}
        )

        def body() -> bytes:
            with urllib.request.urlopen(request, timeout=10) as response:
                return bytes(response.read())

        scrape = {
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [{"job_name": "pgq-exporter", "static_configs": [
                {"targets": [f"127.0.0.1:{exporter.port}"]}]}],
        }  # fmt: skip
        with running_prometheus(Path(tmp), scrape, ("native-histograms",)) as prometheus:
            prometheus.wait(f"count(pgq_queue_ready_jobs == 1) == {QUEUES}")
            served = body()
            plain = gzip.decompress(served)
            assert len(plain) > MEMBERS_FROM
            assert _members(served) > 10  # a member a family
            families = read_delimited(plain)
            series = sum(len(family.metric) for family in families)
            # What Prometheus read of the last scrape: every series served, each family's
            # across the members' seams.
            prometheus.wait('scrape_samples_scraped{job="pgq-exporter"} > 0')
            [read] = prometheus.query('scrape_samples_scraped{job="pgq-exporter"}')
            assert abs(float(read["value"][1]) - series) <= series * 0.01
            prometheus.wait(f'count(pgq_queue_jobs{{status="pending"}} == 1) == {QUEUES}')
            prometheus.wait(f"count(pgq_job_processing_seconds) == {QUEUES}")
