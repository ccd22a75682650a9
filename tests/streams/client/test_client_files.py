"""The client's files over ASGI: headers for any origin, the versioned paths, the manifest and the tarball."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import tarfile
from base64 import b64encode
from pathlib import Path
from typing import Any

import pytest

from streams.core.asgi import Message, Scope
from streams.server.client_files import ClientFiles, PackageOnDisk
from streams.server.client_package import PACKAGE_DIR, package_read

VERSION = json.loads((PACKAGE_DIR / "package.json").read_bytes())["version"]
IMMUTABLE = "public, max-age=31536000, immutable"


class Answer:
    def __init__(self, messages: list[Message]) -> None:
        self.status = messages[0]["status"] if messages else None
        self.headers = {name.decode(): value.decode() for name, value in messages[0]["headers"]} if messages else {}
        self.body = b"".join(m.get("body", b"") for m in messages[1:])


async def fallback(scope: Scope, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 418, "headers": []})
    await send({"type": "http.response.body", "body": b"fallback"})


async def ask(app: ClientFiles, path: str, method: str = "GET", **headers: str) -> Answer:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()],
    }
    await app(scope, receive, send)
    return Answer(sent)


@pytest.fixture
def app() -> ClientFiles:
    return ClientFiles(fallback)


def sha384(body: bytes) -> str:
    return "sha384-" + b64encode(hashlib.sha384(body).digest()).decode()


async def test_the_stable_path_answers_any_origin_and_revalidates(app: ClientFiles) -> None:
    answer = await ask(app, "/static/sluice/sluice.js", origin="https://shop.example")
    assert answer.status == 200
    assert answer.body == (PACKAGE_DIR / "sluice.js").read_bytes()
    assert answer.headers["access-control-allow-origin"] == "*"
    assert answer.headers["cross-origin-resource-policy"] == "cross-origin"
    assert answer.headers["content-type"] == "text/javascript; charset=utf-8"
    assert answer.headers["cache-control"] == "no-cache"
    assert answer.headers["content-length"] == str(len(answer.body))
    again = await ask(app, "/static/sluice/sluice.js", if_none_match=answer.headers["etag"])
    assert (again.status, again.body, again.headers["etag"]) == (304, b"", answer.headers["etag"])
    assert again.headers["access-control-allow-origin"] == "*"


async def test_head_and_every_file_of_the_package(app: ClientFiles) -> None:
    for name in ("sluice.js", "sluice.d.ts", "package.json", "README.md", "test/sluice.test.mjs"):
        head = await ask(app, f"/static/sluice/{name}", "HEAD")
        assert (head.status, head.body) == (200, b""), name
        assert head.headers["content-length"] == str((PACKAGE_DIR / name).stat().st_size)


async def test_a_preflight_is_answered_for_any_origin(app: ClientFiles) -> None:
    answer = await ask(
        app,
        f"/client/sluice@{VERSION}/sluice.js",
        "OPTIONS",
        origin="https://shop.example",
        access_control_request_method="GET",
        access_control_request_headers="x-requested-with",
    )
    assert answer.status == 204
    assert answer.headers["access-control-allow-origin"] == "*"
    assert answer.headers["access-control-allow-methods"] == "GET, HEAD, OPTIONS"
    assert answer.headers["access-control-allow-headers"] == "x-requested-with"
    assert answer.headers["access-control-max-age"] == "86400"


async def test_other_methods_are_refused_with_their_allow_header(app: ClientFiles) -> None:
    answer = await ask(app, "/static/sluice/sluice.js", "POST")
    assert answer.status == 405
    assert answer.headers["allow"] == "GET, HEAD, OPTIONS"
    assert json.loads(answer.body)["error"] == "method_not_allowed"


async def test_the_versioned_path_is_immutable(app: ClientFiles) -> None:
    answer = await ask(app, f"/client/sluice@{VERSION}/sluice.js")
    assert answer.status == 200
    assert answer.body == (PACKAGE_DIR / "sluice.js").read_bytes()
    assert answer.headers["cache-control"] == IMMUTABLE
    assert answer.headers["access-control-allow-origin"] == "*"
    assert answer.headers["etag"]


async def test_another_version_is_a_404_that_names_the_one_served(app: ClientFiles) -> None:
    answer = await ask(app, "/client/sluice@0.0.1/sluice.js")
    assert answer.status == 404
    body = json.loads(answer.body)
    assert body["error"] == "unknown_client_file"
    assert f"/client/sluice@{VERSION}/" in body["detail"]
    assert answer.headers["access-control-allow-origin"] == "*"


async def test_other_static_paths_are_left_to_the_static_files(app: ClientFiles) -> None:
    assert (await ask(app, "/static/sluice/nothing.js")).status == 418
    assert (await ask(app, "/static/admin/css/base.css")).status == 418
    assert (await ask(app, "/healthz")).status == 418


async def test_the_manifest_gives_each_file_its_integrity(app: ClientFiles) -> None:
    answer = await ask(app, "/client/sluice.json")
    assert answer.headers["access-control-allow-origin"] == "*"
    manifest = json.loads(answer.body)
    assert manifest["version"] == VERSION
    assert manifest["module"] == f"/client/sluice@{VERSION}/sluice.js"
    js = manifest["files"]["sluice.js"]
    assert js["integrity"] == sha384((PACKAGE_DIR / "sluice.js").read_bytes())
    assert (await ask(app, js["url"])).body == (PACKAGE_DIR / "sluice.js").read_bytes()
    tarball = await ask(app, manifest["tarball"]["url"])
    digest = "sha512-" + b64encode(hashlib.sha512(tarball.body).digest()).decode()
    assert manifest["tarball"]["integrity"] == digest


async def test_the_tarball_has_npms_layout_and_the_same_bytes_each_time(app: ClientFiles) -> None:
    answer = await ask(app, f"/client/sluice-client-{VERSION}.tgz")
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/gzip"
    assert answer.headers["cache-control"] == IMMUTABLE
    with tarfile.open(fileobj=io.BytesIO(answer.body), mode="r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == [
            "package/README.md",
            "package/package.json",
            "package/sluice.d.ts",
            "package/sluice.js",
            "package/test/sluice.test.mjs",
        ]
        extracted = tar.extractfile("package/sluice.js")
        assert extracted is not None
        assert extracted.read() == (PACKAGE_DIR / "sluice.js").read_bytes()
    assert gzip.decompress(answer.body)  # a plain gzip stream
    assert package_read().tarball.body == answer.body


async def test_an_edited_file_is_served_at_once(app: ClientFiles, tmp_path: Path) -> None:
    copy = tmp_path / "sluice"
    shutil.copytree(PACKAGE_DIR, copy)
    app = ClientFiles(fallback, PackageOnDisk(copy))
    first = await ask(app, "/static/sluice/sluice.js")
    (copy / "sluice.js").write_bytes(b"export const edited = true;\n")
    second = await ask(app, "/static/sluice/sluice.js")
    assert second.body == b"export const edited = true;\n"
    assert second.headers["etag"] != first.headers["etag"]
