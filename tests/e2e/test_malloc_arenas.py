"""`serve`'s malloc settings: glibc gives each thread that allocates an arena of its own
(up to eight a core), each keeping what was freed in it; serve keeps two, unless
MALLOC_ARENA_MAX says otherwise, and has glibc's malloc_trim to call after its jobs. Counted by glibc itself (malloc_info), in a process of
its own with eight threads allocating at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import ctypes, ctypes.util, sys, threading
from pgq_exporter.runtime.memory import TRIMMER, give_back_freed_memory
if sys.argv[1] == "set":
    if not give_back_freed_memory():
        sys.exit("not glibc")
    assert TRIMMER.trim is not None and TRIMMER.trim(0) in (0, 1)  # glibc's malloc_trim
together = threading.Barrier(8)
def allocate():
    together.wait()
    kept = [bytearray(4096) for _ in range(100)]  # past pymalloc: glibc's malloc
    together.wait()
threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
libc.fclose.argtypes = (ctypes.c_void_p,)
out = libc.fopen(sys.argv[2].encode(), b"w")
libc.malloc_info(0, out)
libc.fclose(out)
"""


def _arenas(tmp_path: Path, mode: str, env: dict[str, str]) -> int:
    script, report = tmp_path / "probe.py", tmp_path / f"malloc-{mode}.xml"
    script.write_text(PROBE)
    subprocess.run(
        [sys.executable, str(script), mode, str(report)],
        env=env, check=True, timeout=60,
    )  # fmt: skip
    return report.read_text().count("<heap nr=")


def _environment(**env: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env


def test_threads_allocating_at_once_share_two_arenas(tmp_path: Path) -> None:
    assert _arenas(tmp_path, "default", _environment()) > 2  # glibc's own: one a thread
    assert _arenas(tmp_path, "set", _environment()) == 2


def test_malloc_arena_max_where_set_is_left_as_it_is(tmp_path: Path) -> None:
    assert _arenas(tmp_path, "set", _environment(MALLOC_ARENA_MAX="4")) == 4
