"""The admin names Sluice, not Django, in its header, its page titles and its index."""

from __future__ import annotations

from typing import Any


def test_admin_login_page_names_sluice(client: Any, db: None) -> None:
    page = client.get("/admin/login/").content.decode()
    assert "<title>Log in | Sluice administration</title>" in page
    assert '<div id="site-name"><a href="/admin/">Sluice administration</a></div>' in page
    assert "Django administration" not in page
    assert "Django site admin" not in page


def test_admin_index_names_sluice(admin_client: Any) -> None:
    page = admin_client.get("/admin/").content.decode()
    assert "<title>Sluice configuration | Sluice administration</title>" in page
    assert "Sluice configuration" in page
    assert "Site administration" not in page
