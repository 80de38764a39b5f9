"""Django settings for the django-tasks-db preset test: the database from $PGQ_DJANGO_DSN."""

from __future__ import annotations

import os

from psycopg.conninfo import conninfo_to_dict

_parts = conninfo_to_dict(os.environ.get("PGQ_DJANGO_DSN", "dbname=unset"))

SECRET_KEY = "only-for-tests"
USE_TZ = True
INSTALLED_APPS = ["django_tasks", "django_tasks_db"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _parts.get("dbname"),
        "USER": _parts.get("user"),
        "HOST": _parts.get("host", ""),
        "PORT": _parts.get("port", ""),
        "PASSWORD": _parts.get("password", ""),
    }
}
TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": ["default", "alpha", "beta", "gamma"],
    }
}
