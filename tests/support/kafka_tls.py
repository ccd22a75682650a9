"""Kafka behind TLS for the tests: the embedded broker with Debian's stunnel4 in front of it.

The embedded broker ignores its own TLS flags, so stunnel terminates TLS (and, for
mutual TLS, requires a client certificate signed by the test CA) and the broker
advertises the stunnel port: every connection a client makes goes through TLS.
The certificates are made here, for 127.0.0.1.
"""

from __future__ import annotations

import datetime
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from streams.server.broker import EmbeddedBroker, free_port
from streams.server.processes import process_stop

STUNNEL = shutil.which("stunnel4") or shutil.which("stunnel")


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def _issue(
    subject: str, issuer: str, issuer_key: ec.EllipticCurvePrivateKey, public: ec.EllipticCurvePublicKey, *, ca: bool
) -> x509.Certificate:
    import ipaddress

    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        san = x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        )
        builder = builder.add_extension(san, critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass
class Certificates:
    """A test CA, a server and a client certificate it signed, and another CA that signed nothing here."""

    directory: Path

    def __post_init__(self) -> None:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _issue("sluice-test-ca", "sluice-test-ca", ca_key, ca_key.public_key(), ca=True)
        self.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        for name in ("server", "client"):
            key = ec.generate_private_key(ec.SECP256R1())
            cert = _issue(name, "sluice-test-ca", ca_key, key.public_key(), ca=False)
            _write_key(key, d / f"{name}.key")
            (d / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        other_key = ec.generate_private_key(ec.SECP256R1())
        other = _issue("another-ca", "another-ca", other_key, other_key.public_key(), ca=True)
        self.other_ca.write_bytes(other.public_bytes(serialization.Encoding.PEM))

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def other_ca(self) -> Path:
        return self.directory / "other-ca.pem"

    def pair(self, name: str) -> tuple[Path, Path]:
        return self.directory / f"{name}.pem", self.directory / f"{name}.key"


@dataclass
class TLSBroker:
    """The embedded broker reachable only through stunnel (TLS; mutual TLS with ``mutual``)."""

    certificates: Certificates
    mutual: bool = False
    port: int = 0
    broker: EmbeddedBroker | None = None
    tunnel: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self, **extra: str) -> dict[str, str]:
        """librdkafka settings of a client that gets through (a test producer's)."""
        config = {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.certificates.ca),
        }
        if self.mutual:
            cert, key = self.certificates.pair("client")
            config |= {"ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
        return config | extra

    def start(self) -> TLSBroker:
        assert STUNNEL is not None, "stunnel4 is not installed (apt-get install stunnel4)"
        self.port = free_port()
        inner = free_port()
        self.broker = EmbeddedBroker(port=inner, advertised=f"127.0.0.1:{self.port}").start()
        cert, key = self.certificates.pair("server")
        conf = self.certificates.directory / f"stunnel-{self.port}.conf"
        lines = [
            "foreground = yes",
            "pid =",
            "[kafka]",
            f"accept = 127.0.0.1:{self.port}",
            f"connect = 127.0.0.1:{inner}",
        ]
        lines += [f"cert = {cert}", f"key = {key}"]
        if self.mutual:
            lines += ["verifyChain = yes", "requireCert = yes", f"CAfile = {self.certificates.ca}"]
        conf.write_text("\n".join(lines) + "\n")
        self.tunnel = subprocess.Popen([STUNNEL, str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("stunnel did not listen") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.tunnel is not None:
            process_stop(self.tunnel, timeout=5)
            self.tunnel = None
        if self.broker is not None:
            self.broker.stop()
            self.broker = None
