"""The client package as a site installs it: the tarball downloaded from a running gateway, or the repository.

npm installs a tarball or a directory without the registry (``--offline``); the
package is imported by name with node, and its own tests pass in the unpacked package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import Gateway

PACKAGE = Path(__file__).resolve().parents[3] / "streams" / "static" / "sluice"
EXPORTS = ["SluiceStream", "compositeDrop", "compositeEncode", "compositeParts", "memberOf", "open", "parseEventStream"]

pytestmark = [
    pytest.mark.skipif(shutil.which("npm") is None, reason="node and npm are not installed"),
    pytest.mark.django_db(transaction=True),
]


def run(*command: str, cwd: Path) -> str:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout}{result.stderr}"
    return result.stdout


def site(directory: Path) -> Path:
    """An empty project of a site that bundles its pages."""
    directory.mkdir()
    (directory / "package.json").write_text('{"name": "site", "version": "0.0.0", "private": true, "type": "module"}')
    return directory


def imported_names(project: Path) -> list[str]:
    script = "const m = await import('@sluice/client'); console.log(JSON.stringify(Object.keys(m).sort()));"
    return json.loads(run("node", "--input-type=module", "-e", script, cwd=project))


def test_the_tarball_from_the_gateway_installs_imports_and_passes_its_tests(gateway: Gateway, tmp_path: Path) -> None:
    with urllib.request.urlopen(f"{gateway.url}/client/sluice.json", timeout=10) as answer:
        manifest = json.load(answer)
    assert manifest["version"] == json.loads((PACKAGE / "package.json").read_text())["version"]
    tarball = tmp_path / Path(manifest["tarball"]["url"]).name
    with urllib.request.urlopen(gateway.url + manifest["tarball"]["url"], timeout=10) as answer:
        assert answer.headers["access-control-allow-origin"] == "*"
        tarball.write_bytes(answer.read())

    project = site(tmp_path / "site")
    run("npm", "install", "--offline", "--no-audit", "--no-fund", str(tarball), cwd=project)
    assert imported_names(project) == EXPORTS
    lock = json.loads((project / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/@sluice/client"]["integrity"] == manifest["tarball"]["integrity"]

    # Unpacked on its own, as `npm pack` leaves it: its tests need nothing outside the package.
    with tarfile.open(tarball) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    out = run("npm", "test", "--silent", cwd=tmp_path / "unpacked" / "package")
    assert "# fail 0" in out


def test_the_package_installs_from_the_repository(tmp_path: Path) -> None:
    project = site(tmp_path / "site")
    run("npm", "install", "--offline", "--no-audit", "--no-fund", "--install-links", str(PACKAGE), cwd=project)
    assert imported_names(project) == EXPORTS
    installed = project / "node_modules" / "@sluice" / "client"
    shipped = ["README.md", "package.json", "sluice.d.ts", "sluice.js", "test"]
    assert sorted(p.name for p in installed.iterdir()) == shipped
