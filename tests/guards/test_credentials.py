"""Reading the token from a request: cookie, then header, then query; the header template decides the prefix."""

from __future__ import annotations

from guards.credentials import cookie_read, credentials_read
from guards.policy import CredentialSources

ALL = CredentialSources(cookie="jwt", header="authorization", header_prefix="Bearer ", query="access_token")


def test_order_cookie_header_query() -> None:
    headers = [(b"cookie", b"jwt=from-cookie"), (b"authorization", b"Bearer from-header")]
    query = {"access_token": ["from-query"]}
    assert credentials_read(ALL, headers, query) == "from-cookie"
    assert credentials_read(ALL, headers[1:], query) == "from-header"
    assert credentials_read(ALL, [], query) == "from-query"
    assert credentials_read(ALL, [], {}) is None


def test_sources_the_guard_does_not_name_are_ignored() -> None:
    header_only = CredentialSources()
    assert credentials_read(header_only, [(b"cookie", b"jwt=x")], {"access_token": ["y"]}) is None


def test_header_prefix_is_case_insensitive_and_other_schemes_do_not_count() -> None:
    assert credentials_read(ALL, [(b"authorization", b"bearer abc")], {}) == "abc"
    assert credentials_read(ALL, [(b"authorization", b"Basic dXNlcjpwdw==")], {}) is None
    assert credentials_read(ALL, [(b"authorization", b"Bearer ")], {}) is None


def test_custom_header_and_template() -> None:
    sources = CredentialSources(header="x-token", header_prefix="JWT ", header_suffix=";")
    assert credentials_read(sources, [(b"x-token", b"JWT abc;")], {}) == "abc"


def test_cookie_parsing_is_lenient() -> None:
    headers = [(b"cookie", b"broken; a=1"), (b"cookie", b'x=2;  jwt="quoted" ; y=3')]
    assert cookie_read(headers, "jwt") == "quoted"
    assert cookie_read(headers, "missing") is None


def test_empty_values_count_as_absent() -> None:
    assert credentials_read(ALL, [(b"cookie", b"jwt=")], {"access_token": [""]}) is None
