"""URL configuration for the pages and endpoints Django serves (streams are routed in asgi.py)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

from streams import views
from streams.responses import not_found

handler404 = not_found

urlpatterns = [
    path("", views.index, name="index"),
    path("viewer/", views.viewer, name="viewer"),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", views.metrics, name="metrics"),
    path("admin/", admin.site.urls),
]
