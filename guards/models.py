"""JWT guard policies (SPEC 4.1), edited in the admin; compiled by :mod:`guards.policy`."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from common.models import Named

from .policy import GuardPolicy, PolicyError, policy_compile

GUARD_NAME = RegexValidator(
    r"^[A-Za-z0-9._-]{1,100}$", "Letters, digits, '.', '_' and '-' (it appears in realm=\"...\")."
)
HEADER_NAME = RegexValidator(r"^[A-Za-z0-9-]*$", "An HTTP header name: letters, digits and '-'.")
PARAMETER_NAME = RegexValidator(r"^[A-Za-z0-9._~-]*$", "Letters, digits, '.', '_', '~' and '-'.")


def _default_algorithms() -> list[str]:
    return ["RS256"]


class Guard(Named):
    """Who may open a guarded route: issuer, audience, keys, and where roles and identity live in the token."""

    name = models.CharField(max_length=100, unique=True, validators=[GUARD_NAME])
    issuer = models.CharField(max_length=300, blank=True, help_text="Required iss; blank: not checked.")
    audience = models.CharField(max_length=300, blank=True, help_text="Required aud; blank: not checked.")
    algorithms = models.JSONField(
        default=_default_algorithms,
        help_text='Allowed algorithms, e.g. ["RS256", "ES256"]: RS256/384/512, PS256, ES256/384, EdDSA, HS256.',
    )
    keys = models.JSONField(
        default=list,
        blank=True,
        help_text='Inline public JWKs, each with kid and alg (a JWKS document {"keys": [...]} is accepted too).',
    )
    jwks_url = models.URLField(
        blank=True, help_text="JWKS endpoint (https, or http to loopback): cached, refreshed on an unknown kid."
    )
    secret = models.CharField(max_length=500, blank=True, help_text="HS256 secret (at least 32 bytes).")
    roles_claim = models.CharField(
        max_length=200, default="scope", help_text="Claim path of the roles: a string is split on spaces, a list used."
    )
    identity_claim = models.CharField(max_length=200, default="sub", help_text="Claim path of ${identity}.")
    attributes = models.JSONField(
        default=dict, blank=True, help_text='${attributes.NAME} -> claim path, e.g. {"tenant": "org.id"}.'
    )
    challenge = models.PositiveIntegerField(default=0, help_text="Seconds before exp to challenge; 0 = never.")
    leeway = models.PositiveIntegerField(default=0, help_text="Clock skew allowed on exp/nbf/iat, in seconds.")
    header_name = models.CharField(
        max_length=100, default="authorization", blank=True, validators=[HEADER_NAME], help_text="Blank: no header."
    )
    header_template = models.CharField(max_length=200, default="Bearer {credentials}", blank=True)
    query_param = models.CharField(
        max_length=100, blank=True, validators=[PARAMETER_NAME], help_text="e.g. access_token; blank: none."
    )
    cookie_name = models.CharField(max_length=100, blank=True, validators=[PARAMETER_NAME], help_text="Blank: none.")

    def clean(self) -> None:
        super().clean()
        try:
            self.policy()
        except PolicyError as exc:
            raise ValidationError({exc.field: exc.message}) from exc

    def policy(self) -> GuardPolicy:
        """The compiled policy (raises :class:`PolicyError`)."""
        return policy_compile(
            name=self.name,
            issuer=self.issuer,
            audience=self.audience,
            algorithms=self.algorithms,
            keys=self.keys,
            secret=self.secret,
            jwks_url=self.jwks_url,
            roles_claim=self.roles_claim,
            identity_claim=self.identity_claim,
            attributes=self.attributes,
            challenge=self.challenge,
            leeway=self.leeway,
            header_name=self.header_name,
            header_template=self.header_template,
            query_param=self.query_param,
            cookie_name=self.cookie_name,
        )
