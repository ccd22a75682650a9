"""The REST API's shared pieces: service-backed serializers, config viewsets, staff tokens.

Each app with an API has an ``api.py`` with ``api_register(router)``;
``project/urls.py`` lists them. Writes go through the apps' services (the same
path as the admin and ``applyconfig``), so a serializer only maps fields and errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models, transaction
from django.db.models import ProtectedError
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework_simplejwt.serializers import TokenObtainPairSerializer
from rest_framework_simplejwt.views import TokenObtainPairView

from common.models import fields_editable, fields_read_only


def api_fields(
    model: type[models.Model], *, key: str = "name", after: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """A model's columns as the API shows them: the editable ones (``key`` first), then the read-only ones.

    ``after`` places a serializer field that is not a column (a nested list, say) after the column it names.
    """
    names: list[str] = []
    for name in (*fields_editable(model, first=key), *fields_read_only(model)):
        names += [name, after[name]] if after and name in after else [name]
    return tuple(names)


def validation_detail(error: DjangoValidationError) -> dict[str, Any]:
    """A model's ``ValidationError`` as DRF field errors (``__all__`` becomes ``non_field_errors``)."""
    if hasattr(error, "error_dict"):
        return {
            ("non_field_errors" if field == NON_FIELD_ERRORS else field): messages
            for field, messages in error.message_dict.items()
        }
    return {"non_field_errors": error.messages}


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The object is still in use."
    default_code = "conflict"


class ServiceSerializer(serializers.ModelSerializer):
    """A model serializer whose writes call a service ``upsert(**{key: value}, **fields)``.

    Subclasses set ``key`` (the natural key the service looks up by) and
    implement :meth:`upsert`. A changed key on update renames the row first,
    in the same transaction, so the service then finds and validates it.
    """

    key: ClassVar[str] = "name"

    def upsert(self, fields: dict[str, Any]) -> models.Model:
        raise NotImplementedError

    def create(self, validated_data: dict[str, Any]) -> models.Model:
        return self._write(None, validated_data)

    def update(self, instance: models.Model, validated_data: dict[str, Any]) -> models.Model:
        return self._write(instance, validated_data)

    def _write(self, instance: models.Model | None, fields: dict[str, Any]) -> models.Model:
        try:
            with transaction.atomic():
                model = self.Meta.model
                if instance is None and model._default_manager.filter(**{self.key: fields[self.key]}).exists():
                    # The service would update it: a create must not.
                    raise serializers.ValidationError({self.key: [f"{fields[self.key]!r} exists already."]})
                if instance is not None:
                    old = getattr(instance, self.key)
                    new = fields.setdefault(self.key, old)
                    if new != old:
                        if model._default_manager.filter(**{self.key: new}).exclude(pk=instance.pk).exists():
                            raise serializers.ValidationError({self.key: [f"{new!r} is taken."]})
                        model._default_manager.filter(pk=instance.pk).update(**{self.key: new})
                return self.upsert(fields)
        except DjangoValidationError as error:
            raise serializers.ValidationError(validation_detail(error)) from error


class ConfigViewSet(viewsets.ModelViewSet):
    """CRUD for one configuration model; deletes go through :meth:`instance_delete` (a service call)."""

    def instance_delete(self, instance: Any) -> None:
        raise NotImplementedError

    def perform_destroy(self, instance: models.Model) -> None:
        try:
            self.instance_delete(instance)
        except ProtectedError as exc:
            users = ", ".join(sorted({str(obj) for obj in exc.protected_objects})[:10])
            raise Conflict(f"{instance} is still used by: {users}") from exc


class StaffTokenObtainPairSerializer(TokenObtainPairSerializer):
    """Tokens for the admin API go to staff accounts only."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, str]:
        data = super().validate(attrs)
        if self.user is None or not self.user.is_staff:
            raise exceptions.AuthenticationFailed("Only staff accounts get admin API tokens.", code="not_staff")
        return data


class StaffTokenObtainPairView(TokenObtainPairView):
    """``POST {username, password}`` -> ``{access, refresh}`` for a staff account."""

    serializer_class = StaffTokenObtainPairSerializer
