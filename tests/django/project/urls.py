"""The test project's URLs: alkstore's admin pages, then Django's admin, as the docs say to include them."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/alkstore/", include("alkstore.adapters.django.urls")),
    path("admin/", admin.site.urls),
]
