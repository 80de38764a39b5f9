"""HTTP: /metrics, /probe, /targets, the landing page, health, readiness and reload,
with the web config's TLS and basic auth. A request reads the snapshots the runtime
published; only a first probe waits, up to its scrape's deadline, for its target's
first collection.
"""
