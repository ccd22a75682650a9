"""Every kind of refused token reaches the wire as 401 with its reason, and none is ever written to the log."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from guards.verification import MAX_TOKEN_BYTES
from tests.guards.test_admission_wire import WAIT, bearer, client, guard, secure  # noqa: F401 (fixtures)
from tests.support.polling import condition_wait
from tests.support.tokens import SECRET, mint, mint_hs256, mint_unsigned, rsa_key

pytestmark = pytest.mark.services


async def test_refused_tokens_answer_their_reason_and_stay_out_of_the_log(
    client: httpx.AsyncClient,  # noqa: F811
    gateway: Any,
    secure: tuple[str, str, str],  # noqa: F811
) -> None:
    path, _, _ = secure
    tokens = {
        "oversized": mint(sub="log-oversized", pad="x" * MAX_TOKEN_BYTES),
        "alg_not_allowed": mint_unsigned(sub="log-none"),
        "unknown_kid": mint(kid="../../etc/passwd", sub="log-kid-path"),
        "alg_mismatch": mint_hs256(rsa_key().public_pem(), kid=rsa_key().kid, sub="log-confusion"),
        "bad_signature": mint_hs256("x'; DROP TABLE guards_guard; -- padding", kid="' OR '1'='1", sub="log-sql"),
    }
    for reason, token in tokens.items():
        response = await client.get(path, headers=bearer(token))
        assert response.status_code == 401, (reason, response.text)
        assert (response.json()["error"], response.json()["reason"]) == ("invalid_token", reason)
        assert token not in response.text

    def refusals() -> list[str]:
        return [line for line in gateway.output if "refused" in line and f"route={path}" in line]

    condition_wait(lambda: len(refusals()) >= len(tokens), within=WAIT, what="the refusals logged")
    output = "".join(gateway.output)
    for token in tokens.values():
        assert token not in output
        assert token.split(".")[1] not in output  # not even the claims
    assert SECRET not in output
