"""The running exporter: the targets it collects, the one scheduler and the one pool of
connections they share, how a target's queue layout is found, and discovery.

Everything here runs on the scheduler's workers; what it produces is each target's
last snapshot, which the HTTP side (``pgq_exporter.http``) reads and never waits for.
"""
