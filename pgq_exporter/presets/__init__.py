"""Presets: the job-queue libraries the exporter knows, and how to find them.

``detect`` reads from the catalog which libraries a database holds
(``pgq-exporter detect``, ``preset: auto``). The reference queue and the seed
article's table are described by a mapping (``config.PRESET_LAYOUTS``); the
queue libraries bring their own SQL (``library.LIBRARY_PRESETS``, with their
SQL beside each declaration in ``libraries/``).
"""
