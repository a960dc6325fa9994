"""alkstore as a backend of Django's tasks framework (``django.tasks``), the ``alkstore[django]`` extra (ADR 039, 045).

Add ``"alkstore.adapters.django"`` to ``INSTALLED_APPS`` and name the backend in ``TASKS``::

    TASKS = {
        "default": {
            "BACKEND": "alkstore.adapters.django.backend.AlkstoreBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"database": "default", "schema": "alkstore"},
        }
    }

``python manage.py alkstore_migrate`` creates (or upgrades) the schema; ``python manage.py
alkstore_worker`` runs the enqueued tasks (``async def`` ones too) and the periodic tasks of
``OPTIONS["schedules"]``; ``include("alkstore.adapters.django.urls")`` under ``admin/alkstore/``
adds the admin pages (ADR 045). Importing this package imports nothing of Django; its modules do.
"""

from __future__ import annotations

__all__: list[str] = []
