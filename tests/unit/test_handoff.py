"""The worker's hand-off of claimed jobs to its handler threads."""

from __future__ import annotations

import threading
import uuid

from pgq_exporter.queue.contract import Job
from pgq_exporter.queue.leases import Handoff


def _job(n: int) -> Job:
    return Job(n, "default", {}, 1, 3, uuid.uuid4())


def test_jobs_come_out_in_claim_order_and_none_once_empty() -> None:
    handoff = Handoff()
    handoff.put_all([_job(1), _job(2), _job(3)])
    assert [handoff.get(0.0).id for _ in range(2)] == [1, 2]  # type: ignore[union-attr]
    assert [job.id for job in handoff.take_all()] == [3]
    assert handoff.get(0.01) is None


def test_each_job_goes_to_one_thread_only() -> None:
    handoff = Handoff()
    got: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        job = handoff.get(30.0)
        if job is not None:
            with lock:
                got.append(job.id)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    handoff.put_all([_job(n) for n in range(4)])
    for thread in threads:
        thread.join(30.0)
    assert sorted(got) == [0, 1, 2, 3]
