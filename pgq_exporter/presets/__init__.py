"""Presets: the job-queue libraries the exporter knows, and how to find them.

``detect`` reads from the catalog which libraries a database holds
(``pgq-exporter detect``, ``preset: auto``). The layouts the exporter can
collect from, the reference queue and the seed article's table, are
``config.PRESET_LAYOUTS``; the other libraries are found but not collected yet.
"""
