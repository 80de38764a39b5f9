"""How often `serve`'s threads take turns at the interpreter. A thread that wants it
waits for the one that holds it to let go, by default every 5 ms. A collection cycle of
thousands of queues is about a second of Python, and a scrape needs the interpreter
several times to read its request and write its answer: at 10,000 queues, with 5 ms
turns, the scrapes' p99 read 82 and 197 ms (protobuf) and 357 and 378 ms (OpenMetrics);
with 1 ms turns, 60 and 72 ms and 196 and 134 ms, for the same cycle
(docs/benchmarks.md, "Queues: from 10 to 10,000 on one exporter").
"""

from __future__ import annotations

import sys

SWITCH_INTERVAL = 0.001  # seconds


def take_turns_often() -> None:
    sys.setswitchinterval(SWITCH_INTERVAL)
