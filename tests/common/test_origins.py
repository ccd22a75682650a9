"""Origins as routes allow them: the form checked where they are configured, and how requests compare."""

from __future__ import annotations

import pytest

from common.origins import origin_allowed, origin_is_host, origin_problem, origins_parse, origins_problem


@pytest.mark.parametrize(
    "value", ["*", "https://app.example.com", "http://localhost:8000", "http://127.0.0.1:3000", "http://[::1]:3000"]
)
def test_origins_a_route_can_allow(value: str) -> None:
    assert origin_problem(value) is None


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("https://app.example.com/", "ends with '/'"),
        ("http://host/index.html", "not an origin"),
        ("app.example.com", "not an origin"),
        ("ftp://app.example.com", "not an origin"),
        ("https://app.example.com:99999", "port"),
        ("https://*.example.com", "not an origin"),
        (3, "not text"),
    ],
)
def test_values_that_are_not_origins_are_named(value: object, said: str) -> None:
    problem = origin_problem(value)
    assert problem is not None
    assert said in problem
    assert repr(value) in problem


def test_a_list_names_its_first_bad_origin() -> None:
    assert origins_problem(["https://a.test", "https://b.test/x"]) == (
        "'https://b.test/x' is not an origin: give scheme://host[:port] (http or https, no path), or *"
    )
    assert origins_problem("https://a.test") is not None  # one string is not a list
    assert origins_problem([]) is None


def test_environment_lists_split_on_commas_and_spaces() -> None:
    assert origins_parse(" https://a.test, http://b.test:8080  https://c.test,") == (
        "https://a.test",
        "http://b.test:8080",
        "https://c.test",
    )


def test_comparison_ignores_case_default_ports_and_a_trailing_slash() -> None:
    assert origin_allowed("https://a.test", ["https://A.test/"])
    assert origin_allowed("https://a.test", ["https://a.test:443"])
    assert not origin_allowed("https://a.test.evil", ["https://a.test"])
    assert not origin_allowed("http://a.test", ["https://a.test"])
    assert origin_allowed("null", ["*"])
    assert not origin_allowed("https://a.test", [])


def test_the_gateways_own_pages_are_its_host() -> None:
    assert origin_is_host("http://127.0.0.1:8000", "http", "127.0.0.1:8000")
    assert origin_is_host("https://gw.example.com", "http", "gw.example.com")  # TLS ended by a proxy
    assert not origin_is_host("http://127.0.0.1:9000", "http", "127.0.0.1:8000")
    assert not origin_is_host("http://127.0.0.1:8000", "http", None)


def test_a_default_that_is_not_an_origin_stops_the_start_naming_the_variable() -> None:
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {**os.environ, "SLUICE_DEV": "1", "SLUICE_CORS_ALLOW_ORIGINS": "https://ok.example, https://bad.example/"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "SLUICE_CORS_ALLOW_ORIGINS: 'https://bad.example/' ends with '/'" in done.stderr
