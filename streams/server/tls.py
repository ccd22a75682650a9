"""TLS for ``runstreams``: server options that offer HTTP/2 by ALPN, and a self-signed certificate for demos."""

from __future__ import annotations

import datetime
import ipaddress
import re
from pathlib import Path
from typing import Any

ALPN_PROTOCOLS = [b"h2", b"http/1.1"]
_PEM_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


def tls_options(cert_file: str | Path, key_file: str | Path) -> Any:
    """Twisted TLS options from PEM files (certificate chain, key), with ``h2`` offered before ``http/1.1``.

    Twisted's ``ssl:`` endpoint string cannot set ALPN, and without it every client speaks HTTP/1.1.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from twisted.internet import ssl

    chain = [x509.load_pem_x509_certificate(block) for block in _PEM_CERTIFICATE.findall(Path(cert_file).read_bytes())]
    if not chain:
        raise ValueError(f"{cert_file} holds no PEM certificate")
    key = serialization.load_pem_private_key(Path(key_file).read_bytes(), password=None)
    # cryptography objects, not pyOpenSSL's (deprecated there); Twisted hands them to pyOpenSSL as they are.
    return ssl.CertificateOptions(
        privateKey=key,  # type: ignore[arg-type]
        certificate=chain[0],  # type: ignore[arg-type]
        extraCertChain=chain[1:],  # type: ignore[arg-type]
        acceptableProtocols=ALPN_PROTOCOLS,
    )


def self_signed_write(
    directory: str | Path, hosts: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
) -> tuple[Path, Path]:
    """A fresh EC key and a self-signed certificate for ``hosts`` (valid 30 days); their paths (cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "sluice-self-signed.pem", directory / "sluice-self-signed.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path
