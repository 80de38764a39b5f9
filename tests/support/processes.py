"""An exporter's processes, measured from outside (the tests and the benchmarks)."""

from __future__ import annotations

import psutil


class ProcessTree:
    """An exporter's processes: `serve` and the collecting process it forks."""

    def __init__(self, pid: int) -> None:
        self._root = psutil.Process(pid)

    def processes(self) -> list[psutil.Process]:
        return [self._root, *self._root.children(recursive=True)]

    def cpu_seconds(self) -> float:
        return float(sum(t.user + t.system for t in (p.cpu_times() for p in self.processes())))

    def threads(self) -> int:
        return int(sum(p.num_threads() for p in self.processes()))

    def rss_bytes(self) -> int:
        return int(sum(p.memory_info().rss for p in self.processes()))
