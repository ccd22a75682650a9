"""The ``guards`` section of configuration files (SPEC 6), registered by this app's ``ready``."""

from __future__ import annotations

from typing import Any

from common.config.section import ModelSection

from .models import Guard
from .services import guard_upsert


class GuardSection(ModelSection):
    name = "guards"
    label = "guard"
    key = "name"
    order = 10
    model = Guard
    renames = {
        "header_template": "credentials.header",
        "header_name": "credentials.header_name",
        "query_param": "credentials.query",
        "cookie_name": "credentials.cookie",
    }
    json_types = {"keys": (list, dict)}
    _credentials = ("credentials.header", "credentials.query", "credentials.cookie")

    def upsert(self, key: str, values: dict[str, Any]) -> None:
        if not values["header_template"]:
            values["header_name"], values["header_template"] = "", "Bearer {credentials}"
        guard_upsert(name=key, **values)

    def complete(self, flat: dict[str, Any]) -> dict[str, Any]:
        if any(key.startswith("credentials.") for key in flat):
            # A credentials block lists the places to read a token: the ones it leaves out are off.
            flat = {**dict.fromkeys(self._credentials, ""), **flat}
        keys = flat.get("keys")
        if isinstance(keys, dict) and isinstance(keys.get("keys"), list):
            keys = keys["keys"]  # a pasted JWKS document
        if isinstance(keys, list):
            flat["keys"] = [jwk_canonical(jwk) for jwk in keys]
        if "algorithms" not in flat:
            algs = [jwk.get("alg") for jwk in flat.get("keys") or [] if isinstance(jwk, dict)]
            named = list(dict.fromkeys(alg for alg in algs if isinstance(alg, str)))
            if named:
                flat["algorithms"] = named
            elif flat.get("secret"):
                flat["algorithms"] = ["HS256"]
        form = super().complete(flat)
        if not form["credentials.header"] or not form["credentials.header_name"]:
            form["credentials.header"], form["credentials.header_name"] = "", "authorization"
        return form

    def read(self, row: Any) -> dict[str, Any]:
        form = super().read(row)
        if not row.header_name:
            form["credentials.header"], form["credentials.header_name"] = "", "authorization"
        return form

    def export(self, form: dict[str, Any]) -> dict[str, Any]:
        item = super().export(form)
        item["algorithms"] = form["algorithms"]
        if "credentials" in item:
            # A block turns off the places it leaves out (see complete): name every place in use.
            item["credentials"] = {key.partition(".")[2]: form[key] for key in self._credentials if form[key]}
            if form["credentials.header"] and form["credentials.header_name"] != "authorization":
                item["credentials"]["header_name"] = form["credentials.header_name"]
        order = dict.fromkeys(spec.key.partition(".")[0] for spec in self.fields)
        return {key: item[key] for key in order if key in item}


def jwk_canonical(jwk: Any) -> Any:
    """A JWK with its big numbers in base64url, as RFC 7518 wants (Zilla also takes standard base64)."""
    if not isinstance(jwk, dict):
        return jwk
    out = dict(jwk)
    for member in ("n", "e", "x", "y"):
        value = out.get(member)
        if isinstance(value, str):
            out[member] = value.replace("+", "-").replace("/", "_").rstrip("=")
    return out
