"""A guard change is a configuration change: routes embed the compiled policy."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save

from streams.signals import config_changed

from .models import Guard

post_save.connect(config_changed, sender=Guard, dispatch_uid="sluice-config-save-Guard")
post_delete.connect(config_changed, sender=Guard, dispatch_uid="sluice-config-delete-Guard")
