"""Admin page for guards: a key, algorithm or secret the hot path could not use is refused on the form."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Field
from django.forms import Field as FormField
from django.http import HttpRequest

from .models import Guard


@admin.register(Guard)
class GuardAdmin(admin.ModelAdmin):
    list_display = ["name", "issuer", "audience", "algorithms", "challenge", "updated"]
    search_fields = ["name", "issuer", "audience", "description"]
    readonly_fields = ["created", "updated"]
    fieldsets = [
        (None, {"fields": ["name", "description", "issuer", "audience"]}),
        ("Keys", {"fields": ["algorithms", "keys", "jwks_url", "secret"]}),
        ("Claims", {"fields": ["roles_claim", "identity_claim", "attributes"]}),
        ("Timing", {"fields": ["challenge", "leeway"]}),
        ("Credentials", {"fields": ["cookie_name", "header_name", "header_template", "query_param"]}),
        ("History", {"fields": ["created", "updated"], "classes": ["collapse"]}),
    ]

    def formfield_for_dbfield(self, db_field: Field[Any, Any], request: HttpRequest, **kwargs: Any) -> FormField | None:
        if db_field.name == "jwks_url":
            kwargs["assume_scheme"] = "https"
        return super().formfield_for_dbfield(db_field, request, **kwargs)
