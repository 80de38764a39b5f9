"""pgq-exporter: see, and be woken by, PostgreSQL job queues."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pgq-exporter")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

DEFAULT_SCHEMA = "pgq"
