"""Why a cluster does not answer, from what librdkafka reports: ``tls``, ``authentication`` or ``unreachable``.

librdkafka retries broken connections forever and, to the caller, every
failure looks the same: a metadata request that times out. The reason is in
its error callback (``_SSL``, ``_AUTHENTICATION``, ``_TRANSPORT`` with the
OpenSSL alert) and in its log (a plaintext client talking to a TLS listener is
only ever "disconnected in state APIVERSION_QUERY"). A
:class:`ClusterDiagnosis` is given to every client of one cluster, keeps the
latest cause, and logs each cause once until the cluster answers again, so a
misconfigured cluster gives one line, not one per request. Nothing logged
comes from the configuration: credentials never reach the log.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

logger = logging.getLogger("sluice.kafka")

TLS = "tls"
AUTHENTICATION = "authentication"
UNREACHABLE = "unreachable"

CAUSE_TEXT = {
    TLS: "the TLS handshake failed",
    AUTHENTICATION: "authentication was refused",
    UNREACHABLE: "no broker answered",
}
_SSL_TEXT = re.compile(r"SSL routines|SSL handshake|certificate|ssl://.*alert", re.IGNORECASE)
# A broker that closes the connection once it sees the first request: a TLS (or SASL) listener.
_PROTOCOL_MISMATCH = re.compile(r"Disconnected.*in state (APIVERSION_QUERY|AUTH_HANDSHAKE)")
_TEXT_LIMIT = 300


def error_cause(code: str, text: str, *, tls_configured: bool) -> str | None:
    """The cause class of one librdkafka error (by its code name, e.g. ``_SSL``), or None if not a failure."""
    if code == "_SSL":
        return TLS
    if code in ("_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "TOPIC_AUTHORIZATION_FAILED"):
        return AUTHENTICATION
    if code == "_TRANSPORT":
        return TLS if _SSL_TEXT.search(text) else UNREACHABLE
    if code in ("_ALL_BROKERS_DOWN", "_RESOLVE", "_TIMED_OUT", "_MSG_TIMED_OUT"):
        return UNREACHABLE
    return None


class ClusterDiagnosis:
    """The latest connection failure of one cluster's clients, with its cause class."""

    def __init__(self, cluster: str, *, tls_configured: bool) -> None:
        self.cluster = cluster
        self.tls_configured = tls_configured
        self.cause: str | None = None
        self.detail = ""
        self._logged: str | None = None
        self._lock = threading.Lock()

    def client_settings(self) -> dict[str, Any]:
        """The callbacks to add to a client's configuration (``error_cb`` and ``logger``)."""
        # Info level: a broker resetting the connection (a TLS listener) is only logged there.
        return {"error_cb": self.on_error, "logger": _LibrdkafkaLog(self), "log_level": 6}

    def on_error(self, error: Any) -> None:
        """librdkafka's error callback (called on the thread that polls the client)."""
        text = str(error.str())
        cause = error_cause(str(error.name()), text, tls_configured=self.tls_configured)
        if cause is not None:
            self.failed(cause, text)

    def on_log(self, text: str) -> None:
        if not self.tls_configured and _PROTOCOL_MISMATCH.search(text):
            self.failed(TLS, f"{text} (the listener may expect TLS: security.protocol SSL or SASL_SSL)")

    def failed(self, cause: str, text: str) -> None:
        """Record a failure; a more telling cause is not replaced by ``unreachable``."""
        with self._lock:
            if cause == UNREACHABLE and self.cause in (TLS, AUTHENTICATION):
                return
            self.cause, self.detail = cause, text[:_TEXT_LIMIT]
            first = self._logged != cause
            self._logged = cause
        if first:
            logger.error("Kafka cluster %s: %s (%s): %s", self.cluster, CAUSE_TEXT[cause], cause, self.detail)

    def answered(self) -> None:
        """The cluster answered (metadata arrived): forget the failure, and say so once."""
        with self._lock:
            was, self.cause, self.detail, self._logged = self.cause, None, "", None
        if was is not None:
            logger.warning("Kafka cluster %s answers again (was: %s)", self.cluster, was)

    def explain(self) -> str:
        """One sentence for a ``503`` detail or ``/readyz``."""
        if self.cause is None:
            return f"Kafka cluster {self.cluster} did not answer in time"
        return f"Kafka cluster {self.cluster}: {CAUSE_TEXT[self.cause]} ({self.cause}): {self.detail}"


class _LibrdkafkaLog:
    """What confluent-kafka's ``logger`` setting calls: each log line goes to the diagnosis, not to the log."""

    def __init__(self, diagnosis: ClusterDiagnosis) -> None:
        self.diagnosis = diagnosis

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        if level >= logging.INFO:
            self.diagnosis.on_log(msg % args if args else msg)
