"""How `serve` keeps its memory: large buffers given back to the system as soon as they
are freed, two malloc arenas whose free pages are given back after a job, and the
garbage collector run less often and over less.

glibc serves an allocation of M_MMAP_THRESHOLD bytes or more with a mapping of its own,
unmapped when freed. By default it raises that threshold to the largest such block
freed so far; from then on, blocks of that size come from the heap's arenas (one per
thread that allocates), and the process keeps their memory after they are freed. A
database whose rows hold megabytes (queue names an application wrote, say) then grows
the exporter by what each thread ever read. With the threshold fixed, such rows cost
memory only while they are read (tests/e2e/test_long_names.py, under load).

glibc also gives each thread that allocates while another holds an arena an arena of
its own, up to eight a core, and each keeps the memory freed in it for that thread's
next allocations: the collectors' threads and the HTTP threads each held some of the
blocks between 512 bytes and the threshold that every run and render makes and frees.
`serve` keeps two (MALLOC_ARENA_MAX, where set, is left as it is). What is free in
them is given back to the system after a scheduled job (malloc_trim), at most once a
second: 0.3-0.4 ms each at 10,000 queues, where the scrapes' and renders' buffers
otherwise stayed with the process (docs/benchmarks.md).

The collector's default thresholds (700, 10, 10) walk the whole heap two or three
times in every collection cycle of 10,000 queues, each time with the interpreter held
from the scrapes: 500-650 ms of a 1.5-1.9 s cycle and render. At (20,000, 20, 100),
the young generations are still collected often, so cycles of objects that die young
(exceptions, frames) go soon, and the whole heap is walked about every 50 cycles
there: 100-160 ms, for a cycle and render of about 1.07 s (docs/benchmarks.md).

What a collector or a render leaves alive (its chunks and the rows it compares, a
render's entries) stays for a cycle or more, and the young collections during the
next runs walked it all again: at 10,000 queues, one young collection a cycle held the
interpreter 11-18 ms walking the lists a render had made (770,000 references). So
`serve` freezes the heap after every collector's run and every scheduled job
(gc.freeze: the objects alive move out of the collector's generations, and are still
freed by their counts); a young collection then walks only what the running one made.
The garbage collector's time at 10,000 queues fell from 40-55 to about 6 ms a 5 s
cycle, the process's CPU from 256-273 to 203-205 ms with the protobuf entries' change
of the same day (docs/benchmarks.md). Every THAW_EVERY the frozen objects go back and
one whole collection frees the reference cycles that died among them, which wait that
long: 123 objects at the first thaw at 10,000 queues, nearly all left from startup;
twenty databases failing every second for 30 s left none. That collection holds the
interpreter longer than the thresholds' whole ones did (360-380 ms at 10,000 queues,
1.16 million objects, and 955 ms at 1,000 probe targets: tuples frozen young are
never untracked), about as often.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import math
import os
import threading
import time
from collections.abc import Callable

M_MMAP_THRESHOLD = -3  # mallopt's parameters, from glibc's malloc.h
M_ARENA_MAX = -8
THRESHOLD = 128 * 1024  # glibc's own initial value
ARENAS = 2
GC_THRESHOLDS = (20_000, 20, 100)
THAW_EVERY = 300.0  # seconds
TRIM_EVERY = 1.0  # seconds


def collect_less_often() -> None:
    gc.set_threshold(*GC_THRESHOLDS)


def give_back_freed_memory() -> bool:
    """Fix glibc's mmap threshold and its arenas, and give its free pages back after
    jobs; False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt, malloc_trim = libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):  # musl, macOS: no mallopt
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    malloc_trim.argtypes = (ctypes.c_size_t,)
    malloc_trim.restype = ctypes.c_int
    if "MALLOC_ARENA_MAX" not in os.environ:
        mallopt(M_ARENA_MAX, ARENAS)
    TRIMMER.trim = malloc_trim
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD))


class Trimmer:
    """Calls ``trim`` (glibc's malloc_trim) after a job, at most once every ``every``
    seconds; does nothing until it has one."""

    def __init__(self, every: float = TRIM_EVERY) -> None:
        self.every = every
        self.trim: Callable[[int], object] | None = None
        self._last = -math.inf

    def after_job(self) -> None:
        trim = self.trim
        if trim is None:
            return
        now = time.monotonic()
        if now - self._last < self.every:
            return
        self._last = now  # two threads that both trim now do no harm
        trim(0)


class HeapFreezer:
    """Freezes the heap after each collector's run and each job, and thaws it with a
    whole collection every ``thaw_every`` seconds; does nothing until enabled."""

    def __init__(self, thaw_every: float = THAW_EVERY) -> None:
        self.thaw_every = thaw_every
        self.enabled = False
        self._lock = threading.Lock()
        self._thawed = time.monotonic()

    def after_job(self) -> None:
        if not self.enabled:
            return
        # Under the lock: a freeze by another worker between the thaw and its
        # collection would keep what it froze from being looked at.
        with self._lock:
            now = time.monotonic()
            if now - self._thawed < self.thaw_every:
                gc.freeze()
                return
            self._thawed = now
            gc.unfreeze()
            gc.collect()


FREEZER = HeapFreezer()
TRIMMER = Trimmer()


def after_job() -> None:
    """What `serve` does after each scheduled job (see above)."""
    FREEZER.after_job()
    TRIMMER.after_job()


def freeze_after_jobs() -> None:
    FREEZER.enabled = True
