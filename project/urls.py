"""URL configuration for the pages and endpoints Django serves (streams are routed in asgi.py)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework_simplejwt.views import TokenRefreshView

from guards import views as guard_views
from project.api import StaffTokenObtainPairView, api_router_build
from streams import dashboard, views
from streams.responses import not_found

handler404 = not_found

urlpatterns = [
    path("", views.index, name="index"),
    path("viewer/", views.viewer, name="viewer"),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", views.metrics, name="metrics"),
    path("asyncapi.json", views.asyncapi, name="asyncapi"),
    path("auth/token", guard_views.token, name="dev-token"),
    path("admin/metrics/", dashboard.metrics_dashboard, name="metrics-dashboard"),
    path("admin/metrics.json", dashboard.metrics_json, name="metrics-json"),
    path("admin/", admin.site.urls),
    path("api/token/", StaffTokenObtainPairView.as_view(), name="api-token"),
    path("api/token/refresh/", TokenRefreshView.as_view(), name="api-token-refresh"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/", include(api_router_build().urls)),
]
