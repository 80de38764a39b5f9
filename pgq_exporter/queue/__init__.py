"""The reference queue: schema, SQL contract, producer, worker, reaper and maintenance.

It depends on nothing of the exporter's runtime: only on ``pgq_exporter.pg`` to
connect, ``pgq_exporter.errors`` and its own SQL (``queue/sql``). The exporter reads
its names and SQL from here.
"""
