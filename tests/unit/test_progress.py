from __future__ import annotations

import io

from pgq_exporter.queue.maintenance import MaintenanceReport, TerminalProgress, partition_name


def test_progress_shows_rows_rate_and_time_left() -> None:
    out = io.StringIO()
    progress = TerminalProgress(out)
    progress.started -= 10  # ten seconds in
    progress(5_000, 20_000)
    progress.done()
    line = out.getvalue()
    assert line.startswith("\rmoved 5,000 / 20,000 rows")
    assert "500 rows/s" in line and "0:30 left" in line and line.endswith("\n")


def test_report_and_partition_names() -> None:
    from datetime import date  # noqa: PLC0415

    assert partition_name(date(2026, 1, 2)) == "jobs_archive_20260102"
    report = MaintenanceReport(created=["a"], moved=3, dropped=["jobs_archive_20200101"])
    assert report.describe() == (
        "moved 3 finished job(s) to the archive; created 1 archive partition(s); "
        "dropped jobs_archive_20200101"
    )
