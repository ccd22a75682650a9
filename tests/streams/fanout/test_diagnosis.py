"""librdkafka's errors and log lines reduced to a cause class, each logged once per cluster until it answers."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from streams.fanout.diagnosis import AUTHENTICATION, TLS, UNREACHABLE, ClusterDiagnosis, error_cause

# As librdkafka reports them (taken from a client against stunnel in front of the embedded broker).
WRONG_CA = (
    "ssl://127.0.0.1:19302/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed:"
    " broker certificate could not be verified (after 1ms in state SSL_HANDSHAKE)"
)
NO_CLIENT_CERT = (
    "ssl://127.0.0.1:19312/bootstrap: Receive failed: error:0A00045C:SSL routines::tlsv13 alert certificate"
    " required: SSL alert number 116 (after 0ms in state APIVERSION_QUERY)"
)
SASL_REFUSED = (
    "sasl_ssl://127.0.0.1:19302/bootstrap: SASL PLAIN mechanism handshake failed: Broker: Unsupported SASL"
    " mechanism (after 2ms in state AUTH_HANDSHAKE)"
)
REFUSED = "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 1ms in state CONNECT)"
PLAIN_TO_TLS = (
    "FAIL [rdkafka#consumer-1] [thrd:127.0.0.1:19312/bootstrap]: 127.0.0.1:19312/bootstrap: Disconnected:"
    " connection reset by peer (after 2ms in state APIVERSION_QUERY)"
)


@dataclass
class FakeError:
    code: str
    text: str

    def name(self) -> str:
        return self.code

    def str(self) -> str:
        return self.text


@pytest.mark.parametrize(
    ("code", "text", "cause"),
    [
        ("_SSL", WRONG_CA, TLS),
        ("_TRANSPORT", NO_CLIENT_CERT, TLS),
        ("_AUTHENTICATION", SASL_REFUSED, AUTHENTICATION),
        ("_TRANSPORT", REFUSED, UNREACHABLE),
        ("_ALL_BROKERS_DOWN", "1/1 brokers are down", UNREACHABLE),
        ("_PARTITION_EOF", "end", None),
    ],
)
def test_error_causes(code: str, text: str, cause: str | None) -> None:
    assert error_cause(code, text, tls_configured=True) == cause


def test_each_cause_is_logged_once_until_the_cluster_answers(caplog: pytest.LogCaptureFixture) -> None:
    diagnosis = ClusterDiagnosis("managed", tls_configured=True)
    with caplog.at_level(logging.WARNING, logger="sluice.kafka"):
        for _ in range(50):
            diagnosis.on_error(FakeError("_SSL", WRONG_CA))
            diagnosis.on_error(FakeError("_ALL_BROKERS_DOWN", "1/1 brokers are down"))
        assert diagnosis.cause == TLS  # not replaced by the less telling "unreachable"
        assert "Kafka cluster managed: the TLS handshake failed (tls): ssl://" in diagnosis.explain()
        diagnosis.answered()
        diagnosis.on_error(FakeError("_AUTHENTICATION", SASL_REFUSED))
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].startswith("Kafka cluster managed: the TLS handshake failed (tls)")
    assert lines[1] == "Kafka cluster managed answers again (was: tls)"
    assert lines[2].startswith("Kafka cluster managed: authentication was refused (authentication)")


def test_a_plaintext_client_reset_by_a_tls_listener_is_a_tls_cause() -> None:
    diagnosis = ClusterDiagnosis("default", tls_configured=False)
    logger = diagnosis.client_settings()["logger"]
    logger.log(logging.ERROR, "%s", PLAIN_TO_TLS)
    assert diagnosis.cause == TLS
    assert "the listener may expect TLS" in diagnosis.detail
    configured = ClusterDiagnosis("default", tls_configured=True)
    configured.client_settings()["logger"].log(logging.ERROR, "%s", PLAIN_TO_TLS)
    assert configured.cause is None
