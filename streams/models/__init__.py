"""Configuration of clusters, schemas, topics and routes, edited in the admin, the API and files.

The models live in :mod:`.kafka` (clusters, schemas, topics) and :mod:`.routes`, the configuration's
revision in :mod:`.revision`, their field validators in :mod:`.validators`; the submodules import each
other, never this package, which only re-exports them (migrations name the validators here:
``streams.models.validate_...``).
"""

from __future__ import annotations

from streams.models.kafka import Cluster, Schema, Topic
from streams.models.revision import ConfigRevision, revision_triggers_install
from streams.models.routes import Route, RouteFilter
from streams.models.validators import (
    KAFKA_TOPIC_NAME,
    reserved_endpoints,
    validate_cluster_properties,
    validate_path_not_reserved,
    validate_path_pattern,
    validate_registry,
    validate_template,
    validate_topic_configs,
    validate_upstream_url,
)
from streams.models.validators import no_control as _no_control  # migrations 0001 and 0006 name it so

__all__ = [
    "KAFKA_TOPIC_NAME",
    "Cluster",
    "ConfigRevision",
    "Route",
    "RouteFilter",
    "Schema",
    "Topic",
    "_no_control",
    "reserved_endpoints",
    "revision_triggers_install",
    "validate_cluster_properties",
    "validate_path_not_reserved",
    "validate_path_pattern",
    "validate_registry",
    "validate_template",
    "validate_topic_configs",
    "validate_upstream_url",
]
