"""A minimal Django project on the local PostgreSQL server, with alkstore as its task backend and its admin pages.

The database, the alkstore schema and the schema of Django's own tables (users, sessions: the
admin's) come from the environment, so that the tests and the worker they start (``manage.py
alkstore_worker``) share one scratch schema of each.
"""

from __future__ import annotations

import os

SECRET_KEY = "tests-only"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "alkstore.adapters.django",
    "tests.django.project.shop",
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "tests.django.project.urls"
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("ALKSTORE_DJANGO_DB_NAME", "test"),
        "USER": os.environ.get("ALKSTORE_DJANGO_DB_USER", "postgres"),
        "PASSWORD": os.environ.get("ALKSTORE_DJANGO_DB_PASSWORD", ""),
        "HOST": os.environ.get("ALKSTORE_DJANGO_DB_HOST", "127.0.0.1"),
        "PORT": os.environ.get("ALKSTORE_DJANGO_DB_PORT", "5432"),
        # Django's own tables (auth, sessions, admin) in a scratch schema of their own.
        "OPTIONS": {"options": f"-c search_path={os.environ.get('ALKSTORE_DJANGO_APP_SCHEMA', 'public')}"},
    },
    # A database alkstore cannot store jobs in, for the backend's checks to refuse.
    "lite": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
}

TASKS = {
    "default": {
        "BACKEND": "alkstore.adapters.django.backend.AlkstoreBackend",
        "QUEUES": ["default", "emails", "ticks", "results"],
        "OPTIONS": {
            "database": "default",
            "schema": os.environ.get("ALKSTORE_DJANGO_SCHEMA", "alkstore"),
            "max_size": 2,
            # Registered by a worker serving "ticks" (only the periodic test starts one).
            "schedules": {"tests.django.project.shop.tasks.tick": "@every 1s"},
        },
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"alkstore": {"handlers": ["stderr"], "level": "INFO"}},
}
