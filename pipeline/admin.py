"""Admin pages for pipelines, with their runs shown read-only on each pipeline."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from common.admin_forms import ReadableFormAdmin

from .models import PIPELINE_RUN_FIELDS, Pipeline, PipelineRun

# A run's columns but its error, too long for a row (the API shows it).
_COLUMNS = tuple(name for name in PIPELINE_RUN_FIELDS if name != "error")


class PipelineRunInline(admin.TabularInline):
    model = PipelineRun
    extra = 0
    max_num = 0
    can_delete = False
    ordering = ["-started", "-id"]
    fields = _COLUMNS
    readonly_fields = _COLUMNS

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Pipeline)
class PipelineAdmin(ReadableFormAdmin):
    field_labels = {
        "json_schema": "JSON Schema (inline)",
        "sql": "SQL",
        "trigger_seconds": "Trigger every (seconds)",
        "on_offset_reset": "When offsets are out of the log",
    }
    list_display = ["name", "source_kind", "source_topic", "source_files", "sink_topic", "dead_letter_topic", "enabled"]
    list_filter = ["enabled", "source_kind"]
    search_fields = ["name", "description", "source_topic", "source_files", "sink_topic"]
    readonly_fields = ["created", "updated"]
    inlines = [PipelineRunInline]
    fieldsets = [
        (None, {"fields": ["name", "description", "enabled"]}),
        ("Source", {"fields": ["source_kind", "source_topic", "source_files", "source_format"]}),
        ("Validation", {"fields": ["schema", "json_schema"]}),
        ("Shape", {"fields": ["sql", "key_field", "header_fields"]}),
        ("Sinks", {"fields": ["sink_topic", "dead_letter_topic"]}),
        ("Running", {"fields": ["trigger_seconds", "checkpoint_location", "on_offset_reset"]}),
        ("History", {"fields": ["created", "updated"], "classes": ["collapse"]}),
    ]
