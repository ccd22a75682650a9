"""URL configuration for the pages and endpoints Django serves (streams are routed in asgi.py)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter
from rest_framework_simplejwt.views import TokenRefreshView

from common.api import StaffTokenObtainPairView
from demo import views as demo_views
from guards import api as guards_api
from guards import views as guard_views
from pipeline import api as pipeline_api
from streams import api as streams_api
from streams import views
from streams.ops import dashboard

admin.site.site_header = "Sluice administration"
admin.site.site_title = "Sluice administration"
admin.site.index_title = "Sluice configuration"

handler400 = views.bad_request
handler404 = views.not_found

# Each app's ``api_register(router)`` adds its endpoints under /api/ (and to the OpenAPI document).
api_router = DefaultRouter()
for _api in (streams_api, guards_api, pipeline_api):
    _api.api_register(api_router)

urlpatterns = [
    path("", views.index, name="index"),
    path("viewer/", views.viewer, name="viewer"),
    # Under /viewer/, one of Sluice's own prefixes: no route can shadow the demo's page.
    path("viewer/scores/", demo_views.scores, name="demo-scores"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("metrics", views.metrics, name="metrics"),
    path("asyncapi.json", views.asyncapi, name="asyncapi"),
    path("auth/token", guard_views.token, name="dev-token"),
    path("admin/metrics/", dashboard.metrics_dashboard, name="metrics-dashboard"),
    path("admin/metrics.json", dashboard.metrics_json, name="metrics-json"),
    path("admin/", admin.site.urls),
    path("api/token/", StaffTokenObtainPairView.as_view(), name="api-token"),
    path("api/token/refresh/", TokenRefreshView.as_view(), name="api-token-refresh"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/", include(api_router.urls)),
]
