"""Who is calling: a bearer token -> a tenant (static tokens, or JWTs from an issuer).

Static tokens are compared in constant time, each of them every time (the time taken says
nothing about which tenant's token was close). JWTs are checked the way the MCP
authorization spec asks of a resource server: signature by a key of the issuer's JWKS, with
exactly the configured algorithm; ``aud`` must be this server's resource URI; ``exp`` must be
present and in the future; ``iss`` must be the issuer; the tenant is a claim. Nothing here
logs a token.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass
from typing import Any

import jwt

from .config import OAuthConfig, Tenants
from .jwks import JWKSUnavailable, SigningKeys

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refusal:
    """Why a request was refused (said to the client; never contains the token)."""

    description: str
    token_given: bool


class JWTVerifier:
    """Checks JWTs against the issuer's JWKS (fetched over HTTP, cached, see ``.jwks``)."""

    def __init__(self, config: OAuthConfig) -> None:
        self.config = config
        self._jwks = SigningKeys(config.jwks_uri, retry=config.jwks_retry)

    async def claims(self, token: str) -> dict[str, Any]:
        """The token's claims; raises ``jwt.PyJWTError`` when it must be refused."""
        header = jwt.get_unverified_header(token)
        if header.get("alg") != self.config.algorithm:
            raise jwt.InvalidAlgorithmError(
                f"the token is signed with {header.get('alg')!r}; this server accepts "
                f"{self.config.algorithm} only"
            )
        key = await self._jwks.key(header.get("kid"))
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=[self.config.algorithm],
            audience=self.config.resource,
            issuer=self.config.issuer,
            leeway=self.config.leeway,
            options={"require": ["exp", "aud", "iss"], "verify_signature": True},
        )
        return claims


class Authenticator:
    """``await authenticate(header) -> tenant name | Refusal``."""

    def __init__(self, tenants: Tenants) -> None:
        self._names = set(tenants.spec.tenants)
        self._static = [(f"Bearer {t}".encode(), name) for name, t in tenants.tokens.items()]
        self.oauth = tenants.oauth
        self._jwt = JWTVerifier(tenants.oauth) if tenants.oauth is not None else None

    async def authenticate(self, authorization: bytes) -> str | Refusal:
        if not authorization:
            return Refusal("this server needs 'Authorization: Bearer <token>'", False)
        found: str | None = None
        for expected, name in self._static:  # every comparison, whatever matches
            if hmac.compare_digest(authorization, expected):
                found = name
        if found is not None:
            return found
        scheme, _, token = authorization.decode("latin-1").partition(" ")
        if self._jwt is None or scheme.lower() != "bearer" or token.count(".") != 2:
            return Refusal("the bearer token is not valid for this server", True)
        try:
            claims = await self._jwt.claims(token.strip())
        except (jwt.PyJWTError, OSError, ValueError) as exc:
            return Refusal(f"the access token was refused: {_why(exc)}", True)
        tenant = claims.get(self._jwt.config.tenant_claim)
        if not isinstance(tenant, str) or tenant not in self._names:
            return Refusal(
                f"the access token's {self._jwt.config.tenant_claim!r} claim names no tenant "
                "of this server",
                True,
            )
        return tenant


def _why(exc: BaseException) -> str:
    """A short reason for the client: the checks' own messages carry no secrets."""
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "it has expired"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"it has no {exc.claim!r} claim"
    if isinstance(exc, jwt.InvalidAudienceError):
        return "its audience ('aud') is not this server's resource URI"
    if isinstance(exc, jwt.InvalidIssuerError):
        return "its issuer is not the configured one"
    if isinstance(exc, JWKSUnavailable):
        return f"its signature cannot be checked now: {exc}"
    if isinstance(exc, jwt.PyJWKClientError):
        log.info("JWKS lookup failed: %s", exc)  # per token: a flood must not flood the log
        return "no key of the issuer's JWKS signs it"
    return str(exc) or type(exc).__name__


__all__ = ["Authenticator", "JWTVerifier", "Refusal"]
