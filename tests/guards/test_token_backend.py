"""The site's token backend of docs/embedding.md (docs/examples/token_backend.py): its tokens open guarded streams."""

from __future__ import annotations

import importlib.util
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, Gateway, Kafka
from tests.streams.edge.test_wire import QUIET, WAIT, open_stream

pytestmark = pytest.mark.services

EXAMPLE = ROOT / "docs" / "examples" / "token_backend.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("token_backend", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def backend(example: ModuleType, tmp_path: Path) -> Iterator[tuple[Any, str]]:
    """The example's server on a free port: (its key, its URL)."""
    from http.server import ThreadingHTTPServer

    key = example.key_load(tmp_path / "site.pem")
    server = ThreadingHTTPServer(("127.0.0.1", 0), example.handler_for(key, ["scores:read"]))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield key, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_key_is_kept_private_and_reused(example: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "k.pem"
    first = example.key_load(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert example.public_jwk(example.key_load(path)) == example.public_jwk(first)
    assert "d" not in example.public_jwk(first)


async def test_a_token_the_example_mints_opens_a_guarded_stream(
    example: ModuleType, backend: tuple[Any, str], gateway: Gateway, kafka: Kafka, route: Any, stream_db: None
) -> None:
    from guards.services import guard_upsert

    key, url = backend
    name = f"site-{uuid.uuid4().hex[:8]}"
    guard_upsert(
        name=name,
        issuer=example.ISSUER,
        audience=example.AUDIENCE,
        algorithms=["ES256"],
        jwks_url=f"{url}/.well-known/jwks.json",
    )
    topic, path = kafka.topic(), f"/site/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, initial="earliest", guard=name, roles=["scores:read"], heartbeat_seconds=QUIET)
    kafka.produce(topic, "for signed-in users", key="k")
    minted = example.token_mint(key, subject="ada", roles=["scores:read"])
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as client:
        served = (await client.post(f"{url}/token")).json()
        assert served["expires_in"] == example.LIFETIME_SECONDS
        assert (await client.get(path)).status_code == 401
        for token in (minted, served["access_token"]):
            headers = {"authorization": f"Bearer {token}"}
            async with open_stream(client, path, headers=headers) as stream:
                assert [event.data for event in await stream.read_messages(1)] == ["for signed-in users"]
        wrong_roles = example.token_mint(key, subject="ada", roles=["other"])
        assert (await client.get(path, headers={"authorization": f"Bearer {wrong_roles}"})).status_code == 403
