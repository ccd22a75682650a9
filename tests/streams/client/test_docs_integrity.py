"""The client's version and Subresource Integrity hash in the docs are those of its files.

A page copies the hash from the docs into its ``integrity`` attribute: a stale one
would stop the client loading. A change to ``sluice.js`` fails here until the docs
give its new hash (and ``package.json`` a new version: the old versioned URL is
cached for a year).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streams.server.client_package import PACKAGE_DIR, package_read

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / "docs" / "embedding.md", PACKAGE_DIR / "README.md"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_the_docs_give_the_served_version_and_hash(doc: Path) -> None:
    package = package_read()
    text = doc.read_text()
    hashes = set(re.findall(r"sha384-[A-Za-z0-9+/=]+", text))
    versions = set(re.findall(r"sluice@(\d[\w.+-]*?)/", text)) | set(
        re.findall(r"sluice-client-(\d[\w.+-]*?)\.tgz", text)
    )
    assert hashes == {package.files["sluice.js"].integrity}, f"{doc.name}: the sha384 of sluice.js {package.version}"
    assert versions == {package.version}, f"{doc.name}: the version in package.json"


def test_the_package_readme_links_only_to_files_the_package_ships() -> None:
    """Its links work where the README is read: in the repository, the tarball and node_modules."""
    shipped = set(package_read().files)
    targets = re.findall(r"\]\(([^)#]+)", (PACKAGE_DIR / "README.md").read_text())
    assert targets
    assert [t for t in targets if not t.startswith("https://") and t not in shipped] == []
