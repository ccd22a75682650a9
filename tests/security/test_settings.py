"""Deployment settings: no production start without a secret, HSTS and secure cookies under TLS, admin behind login."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, Gateway


def settings_probe(expression: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """Import ``project.settings`` in a fresh interpreter with only ``environment`` set; print ``expression``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLUICE_", "DJANGO_", "SECRET_KEY", "DEBUG"))}
    env.update(environment)
    env["PYTHONPATH"] = str(ROOT)
    code = f"import project.settings as s; print({expression})"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_production_refuses_to_start_without_a_secret_key() -> None:
    done = settings_probe("s.SECRET_KEY")
    assert done.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in done.stderr


def test_production_with_a_secret_key_starts_and_tls_is_off_by_default() -> None:
    done = settings_probe(
        "(s.SESSION_COOKIE_SECURE if hasattr(s, 'SESSION_COOKIE_SECURE') else False)", SECRET_KEY="k" * 50
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_sluice_tls_turns_on_hsts_and_secure_cookies() -> None:
    done = settings_probe(
        "s.SECURE_HSTS_SECONDS, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE", SECRET_KEY="k" * 50, SLUICE_TLS="1"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["31536000", "True", "True"]


def self_signed(directory: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.mark.services
def test_runstreams_with_tls_sends_hsts_and_secure_cookies(
    gateway_factory: Callable[..., Gateway], tmp_path: Path
) -> None:
    cert, key = self_signed(tmp_path)
    gateway = gateway_factory("--tls-cert", str(cert), "--tls-key", str(key))
    assert gateway.url.startswith("https://")
    with httpx.Client(base_url=gateway.url, verify=False, timeout=30) as http:
        page = http.get("/admin/login/")
    assert page.status_code == 200
    assert page.headers["strict-transport-security"].startswith("max-age=31536000")
    csrf = [value for name, value in page.headers.multi_items() if name == "set-cookie" and "csrftoken" in value]
    assert csrf
    assert "Secure" in csrf[0]


def test_admin_needs_a_login(client: Any, db: None) -> None:
    response = client.get("/admin/")
    assert response.status_code == 302
    assert response["location"].startswith("/admin/login/")
    assert client.get("/admin/streams/route/").status_code == 302


def test_admin_login_needs_the_csrf_token(db: None) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests")
    strict = Client(enforce_csrf_checks=True)
    response = strict.post("/admin/login/", {"username": "root", "password": "pw-for-tests"})
    assert response.status_code == 403
    assert "_auth_user_id" not in strict.session
