"""The test project's one model: the README's ``Order`` (its Django example writes one with its job)."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    email = models.EmailField()
