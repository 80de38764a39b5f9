"""Presets: the job-queue libraries the exporter knows, and how to find them.

So far this holds detection only: which libraries a database holds, read
from the catalog (``pgq-exporter detect``). Collecting from a library other
than the reference queue is not built yet.
"""
