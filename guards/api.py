"""REST endpoints for JWT guards; writes go through ``services``. The HS256 secret is write-only."""

from __future__ import annotations

from typing import Any

from rest_framework.routers import DefaultRouter

from common.api import ConfigViewSet, ServiceSerializer, api_fields
from common.models import fields_read_only

from . import services
from .models import Guard


class GuardSerializer(ServiceSerializer):
    class Meta:
        model = Guard
        fields = api_fields(Guard)
        read_only_fields = fields_read_only(Guard)
        extra_kwargs = {"secret": {"write_only": True}}

    def upsert(self, fields: dict[str, Any]) -> Guard:
        return services.guard_upsert(**fields)


class GuardViewSet(ConfigViewSet):
    """JWT guards (SPEC 4): who may open a guarded route."""

    queryset = Guard.objects.all()
    serializer_class = GuardSerializer
    lookup_field = "name"

    def instance_delete(self, instance: Guard) -> None:
        services.guard_delete(guard=instance)


def api_register(router: DefaultRouter) -> None:
    router.register("guards", GuardViewSet)
