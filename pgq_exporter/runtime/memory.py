"""How `serve` keeps its memory: large buffers given back to the system as soon as they
are freed, and the garbage collector run less often.

glibc serves an allocation of M_MMAP_THRESHOLD bytes or more with a mapping of its own,
unmapped when freed. By default it raises that threshold to the largest such block
freed so far; from then on, blocks of that size come from the heap's arenas (one per
thread that allocates), and the process keeps their memory after they are freed. A
database whose rows hold megabytes (queue names an application wrote, say) then grows
the exporter by what each thread ever read. With the threshold fixed, such rows cost
memory only while they are read (tests/e2e/test_long_names.py, under load).

The collector's default thresholds (700, 10, 10) walk the whole heap two or three
times in every collection cycle of 10,000 queues, each time with the interpreter held
from the scrapes: 500-650 ms of a 1.5-1.9 s cycle and render. At (20,000, 20, 100),
the young generations are still collected often, so cycles of objects that die young
(exceptions, frames) go soon, and the whole heap is walked about every 50 cycles
there: 100-160 ms, for a cycle and render of about 1.07 s (docs/benchmarks.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

M_MMAP_THRESHOLD = -3  # mallopt's parameter, from glibc's malloc.h
THRESHOLD = 128 * 1024  # glibc's own initial value
GC_THRESHOLDS = (20_000, 20, 100)


def collect_less_often() -> None:
    gc.set_threshold(*GC_THRESHOLDS)


def give_back_large_buffers() -> bool:
    """Fix glibc's mmap threshold; False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl, macOS: no mallopt
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD))
