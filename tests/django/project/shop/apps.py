"""The test project's application: its tasks, and receivers of Django's task signals."""

from __future__ import annotations

from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "tests.django.project.shop"
    label = "shop"

    def ready(self) -> None:
        from . import receivers  # noqa: F401 (connects the receivers)
