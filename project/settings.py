"""Sluice settings, read from the environment (django-environ).

Every setting a deployment changes has an environment variable; the defaults
give a working single-process development setup (SQLite, in-memory channel
layer, embedded broker).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

from common.origins import origins_parse, origins_problem
from project.channel_layer import channel_layers
from streams.core.clusters import environment_properties

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env(
    DEBUG=(bool, False),
    ALLOWED_HOSTS=(list, ["localhost", "127.0.0.1", "[::1]"]),
)
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG: bool = env("DEBUG")
_secret = env("SECRET_KEY", default="")
if not _secret:
    if not DEBUG and not env.bool("SLUICE_DEV", default=False):
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off (set DEBUG=1 or SLUICE_DEV=1 for development)."
        )
    _secret = "sluice-development-only-not-secret"
SECRET_KEY: str = _secret
ALLOWED_HOSTS: list[str] = env("ALLOWED_HOSTS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "common",
    "demo",
    "streams",
    "guards",
    "pipeline",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "common.middleware.SecureCookiesOverTLS",
    # A view that finds the database away answers 503 with Retry-After (docs/reliability.md, "The database away").
    "common.middleware.DatabaseUnavailableAnswer",
]

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# HTTPS responses carry HSTS (SecurityMiddleware sends it on secure requests only), a year by default as
# browsers' preload lists expect. Behind a proxy that terminates TLS, SLUICE_TLS=1 makes every cookie
# HTTPS-only; with `runstreams --tls-cert` common.middleware.SecureCookiesOverTLS marks them per request.
SECURE_HSTS_SECONDS: int = env.int("SLUICE_HSTS_SECONDS", default=31_536_000)
TLS: bool = env.bool("SLUICE_TLS", default=False)
if TLS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
if env.bool("SLUICE_TRUST_X_FORWARDED_PROTO", default=False):
    # Only behind a proxy that sets the header itself: a client could forge it otherwise.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

WSGI_APPLICATION = None
ASGI_APPLICATION = "project.asgi.application"

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
# A database that does not answer fails a request in seconds, not after the system's TCP timeout
# (minutes): what was read before is served meanwhile. `?connect_timeout=N` in DATABASE_URL overrides it.
if "postgresql" in DATABASES["default"]["ENGINE"]:
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 3)
# pytest-django creates its test database from TEST; a file (not memory) lets the
# gateway subprocess started by the tests share it.
_test_db = env("SLUICE_TEST_DB_NAME", default="")
if _test_db:
    DATABASES["default"]["TEST"] = {"NAME": _test_db}

# redis://, rediss:// (TLS) or redis+sentinel:// (see project/channel_layer.py and docs/operations.md).
CHANNEL_LAYERS = channel_layers(env("REDIS_URL", default=""))

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "project.log_format.PlainFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        }
    },
    # Requests Django refuses as suspicious (bad Host header, ...): counted, one access line each at most,
    # rate-limited per client address, never a traceback (streams/ops/refusals.py).
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
        "refusals": {"()": "streams.ops.refusals.RefusalLog"},
    },
    "loggers": {
        "sluice": {"handlers": ["console"], "level": env("SLUICE_LOG_LEVEL", default="INFO")},
        "django": {"handlers": ["console"], "level": "WARNING"},
        "django.security": {"handlers": ["refusals"], "level": "INFO", "propagate": False},
    },
}

# Sluice's own settings, one namespaced dict: the values the environment sets. Their defaults live
# beside each app (streams/conf.py, guards/conf.py, pipeline/conf.py, demo/conf.py).
_SLUICE_ENVIRONMENT = {
    "KAFKA_BOOTSTRAP_SERVERS": ("KAFKA_BOOTSTRAP_SERVERS", str),
    "KAFKA_TIMEOUT": ("SLUICE_KAFKA_TIMEOUT", float),
    "ROUTE_CACHE_SECONDS": ("SLUICE_ROUTE_CACHE_SECONDS", float),
    "FETCH_LINGER_MS": ("SLUICE_FETCH_LINGER_MS", float),
    "FETCH_WAIT_MS": ("SLUICE_FETCH_WAIT_MS", float),
    "HUB_IDLE_SECONDS": ("SLUICE_HUB_IDLE_SECONDS", float),
    "METADATA_REFRESH_SECONDS": ("SLUICE_METADATA_REFRESH_SECONDS", float),
    "BACKLOG_READERS": ("SLUICE_BACKLOG_READERS", int),
    "MAX_STREAMS_PER_ADDRESS": ("SLUICE_MAX_STREAMS_PER_ADDRESS", int),
    "SHUTDOWN_SECONDS": ("SLUICE_SHUTDOWN_SECONDS", float),
    "DRAIN_SECONDS": ("SLUICE_DRAIN_SECONDS", float),
    "ADMISSIONS_PER_SECOND": ("SLUICE_ADMISSIONS_PER_SECOND", float),
    "UNAVAILABLE_HOLD_SECONDS": ("SLUICE_UNAVAILABLE_HOLD_SECONDS", float),
    "MAX_WAITING_STREAMS": ("SLUICE_MAX_WAITING_STREAMS", int),
    "BROTLI_MAX_STREAMS": ("SLUICE_BROTLI_MAX_STREAMS", int),
    "TRACING": ("SLUICE_TRACING", bool),
    "TRACING_LINK_EVERY": ("SLUICE_TRACING_LINK_EVERY", int),
    "EVENT_LOOP": ("SLUICE_EVENT_LOOP", str),
    "DEV_ISSUER_KEY_FILE": ("SLUICE_DEV_ISSUER_KEY_FILE", Path),
    "VERIFIED_TOKENS": ("SLUICE_VERIFIED_TOKENS", int),
    "SPARK_MASTER": ("SPARK_MASTER", str),
    "PIPELINE_CHECKPOINT_DIR": ("SLUICE_PIPELINE_CHECKPOINT_DIR", str),
    "SPARK_DRIVER_MEMORY": ("SLUICE_SPARK_DRIVER_MEMORY", str),
    "SPARK_LOG_LEVEL": ("SLUICE_SPARK_LOG_LEVEL", str),
    "DEMO_PIPELINE": ("SLUICE_DEMO_PIPELINE", bool),
}
SLUICE: dict[str, Any] = {
    name: env.bool(variable) if kind is bool else kind(env(variable))
    for name, (variable, kind) in _SLUICE_ENVIRONMENT.items()
    if variable in os.environ
}
# Every other KAFKA_<NAME> variable is the librdkafka property <name> of the default cluster, kept as a
# ${env.KAFKA_<NAME>} reference: the value is read when a client connects, so no setting holds a secret.
SLUICE["KAFKA_PROPERTIES"] = environment_properties(os.environ)
# Origins every route allows when its own allow_origins is empty (comma-separated scheme://host[:port], or *).
if "SLUICE_CORS_ALLOW_ORIGINS" in os.environ:
    _origins = origins_parse(env("SLUICE_CORS_ALLOW_ORIGINS"))
    if (_problem := origins_problem(_origins)) is not None:
        raise ImproperlyConfigured(f"SLUICE_CORS_ALLOW_ORIGINS: {_problem}")
    SLUICE["CORS_ALLOW_ORIGINS"] = _origins
# The development token issuer is on with DEBUG unless set explicitly.
SLUICE["DEV_ISSUER"] = env.bool("SLUICE_DEV_ISSUER", default=DEBUG)

# The admin REST API (/api/): staff only, by admin session (with CSRF) or a Bearer token
# from /api/token/ signed for this API alone (its own audience and issuer).
REST_FRAMEWORK = {
    # JWT first: an anonymous request then gets 401 with `www-authenticate: Bearer`, not 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework_simplejwt.authentication.JWTAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
}
SIMPLE_JWT = {
    "ALGORITHM": "HS256",
    "SIGNING_KEY": SECRET_KEY,
    "AUDIENCE": "sluice-admin-api",
    "ISSUER": "sluice",
    "ACCESS_TOKEN_LIFETIME": timedelta(minutes=env.int("SLUICE_API_TOKEN_MINUTES", default=15)),
    "REFRESH_TOKEN_LIFETIME": timedelta(days=1),
    "AUTH_HEADER_TYPES": ("Bearer",),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Sluice admin API",
    "DESCRIPTION": "Topics, routes (with filters), guards and schemas: the configuration the admin edits.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAdminUser"],
}
