"""What the request edge counts as it happens: refusals and challenges (read on ``/metrics`` by :mod:`streams.ops`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

stream_metrics = CollectorRegistry(auto_describe=False)

admission_refusals = Counter(
    "sluice_admission_refusals",
    "Stream requests refused before the response started, by route and reason.",
    ["route", "reason"],
    registry=stream_metrics,
)
challenges_sent = Counter(
    "sluice_challenges_sent",
    "Challenge events sent to guarded streams before their token expires (SPEC 4.3).",
    ["route"],
    registry=stream_metrics,
)
challenges_answered = Counter(
    "sluice_challenges_answered",
    "Challenge responses received, by route and result (accepted: 204, refused: 401/403).",
    ["route", "result"],
    registry=stream_metrics,
)
multiplexed_streams = Gauge(
    "sluice_multiplexed_streams",
    "Multiplexed streams (/streams) open now.",
    registry=stream_metrics,
)
multiplexed_members = Gauge(
    "sluice_multiplexed_members",
    "Members of the multiplexed streams open now (each is also counted under its own route).",
    registry=stream_metrics,
)
origin_refusals = Counter(
    "sluice_origin_refusals",
    "Stream requests and preflights refused for their Origin, by route and origin "
    '(an origin some route or SLUICE_CORS_ALLOW_ORIGINS names, "null", or "other").',
    ["route", "origin", "preflight"],
    registry=stream_metrics,
)
