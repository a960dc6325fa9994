"""The Django application of the alkstore backend: its label, and its system checks (ADR 039)."""

from __future__ import annotations

from django.apps import AppConfig


class AlkstoreConfig(AppConfig):
    """``alkstore.adapters.django`` in ``INSTALLED_APPS``: the management commands, labelled ``alkstore``."""

    name = "alkstore.adapters.django"
    label = "alkstore"
    verbose_name = "alkstore"
