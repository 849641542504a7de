"""The tenants file of ``codemode serve --transport http --tenants FILE``.

```json
{"tenants": {
   "acme":   {"workspace": "/srv/codemode/acme", "token_env": "ACME_TOKEN",
              "env_file": "/etc/codemode/acme.env"},
   "globex": {"workspace": "/srv/codemode/globex", "token_file": "/etc/codemode/globex.token"}},
 "oauth": {"issuer": "https://auth.example.com", "jwks_uri": "https://auth.example.com/jwks",
           "resource": "https://mcp.example.com/mcp", "algorithm": "RS256",
           "tenant_claim": "tenant"}}
```

Tokens are never written in this file: each tenant's comes from an environment variable or
a file of its own. A tenant's ``${VAR}`` secrets (its ``mcp.json``) come from its
``env_file`` only, never from the server's environment, which holds every tenant's token.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Literal

from dotenv import dotenv_values
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import ConfigError
from ..isolation.uids import server_uid

MIN_TOKEN_CHARS = 24
ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA")
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")


class TenantSpec(BaseModel):
    """One tenant: its workspace and where its static token (if any) and secrets are."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workspace: Path
    token_env: str | None = Field(default=None, description="Variable holding its token.")
    token_file: Path | None = Field(default=None, description="File holding its token.")
    env_file: Path | None = Field(
        default=None, description="KEY=value lines: the only source of its ${VAR} secrets."
    )
    allow_unjailed: bool = Field(
        default=False,
        description='Run its "isolation": "none" servers and "host: true" tools (refused '
        "otherwise: they run as the server's own user, outside any jail).",
    )


class OAuthConfig(BaseModel):
    """codemode as an OAuth 2.1 resource server (the MCP authorization spec)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    issuer: str
    jwks_uri: str
    resource: str = Field(description="This server's resource URI: every token's 'aud'.")
    algorithm: Literal[ASYMMETRIC] = "RS256"  # type: ignore[valid-type]
    tenant_claim: str = "tenant"
    leeway: float = Field(default=30.0, ge=0, le=300, description="Clock skew allowed (s).")
    jwks_retry: float = Field(
        default=30.0,
        ge=1,
        le=3600,
        description="Seconds a JWKS fetch blocks the next one: after a failure, or for a "
        "key id the fresh set lacks (such tokens are refused at once meanwhile).",
    )

    @field_validator("resource", "issuer", "jwks_uri")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL")
        return value


class TenantsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tenants: dict[str, TenantSpec]
    oauth: OAuthConfig | None = None

    @field_validator("tenants")
    @classmethod
    def _names(cls, value: dict[str, TenantSpec]) -> dict[str, TenantSpec]:
        if not value:
            raise ValueError("name at least one tenant")
        for name in value:
            if not _NAME.match(name):
                raise ValueError(f"tenant name {name!r}: use a-z, 0-9, '-' and '_' (64 at most)")
        return value


class Tenants:
    """The loaded file: specs, static tokens read, each tenant's environment."""

    def __init__(self, spec: TenantsFile, source: Path, env: dict[str, str]) -> None:
        self.spec = spec
        self.source = source
        self.tokens: dict[str, str] = {}
        """tenant -> its static token (tenants without one authenticate through OAuth)."""
        _check_apart(spec, source)
        seen: dict[str, str] = {}
        for name, tenant in spec.tenants.items():
            token = _read_token(name, tenant, env)
            if token is None:
                if spec.oauth is None:
                    raise ConfigError(
                        f"{source}: tenant {name!r} has no token_env or token_file, and no "
                        "oauth section lets it in another way"
                    )
                continue
            if token in seen:
                raise ConfigError(
                    f"{source}: tenants {seen[token]!r} and {name!r} have the same token"
                )
            seen[token] = name
            self.tokens[name] = token
        by_uid: dict[int, str] = {}
        for name in spec.tenants:
            other = by_uid.setdefault(server_uid(name), name)
            if other != name:
                raise ConfigError(
                    f"{source}: tenants {other!r} and {name!r} would run their upstream servers "
                    f"as the same uid ({server_uid(name)}), so each could read what the "
                    "other's servers wrote; rename one"
                )

    @property
    def oauth(self) -> OAuthConfig | None:
        return self.spec.oauth

    def environment(self, name: str) -> dict[str, str]:
        """What tenant ``name``'s config and ``mcp.json`` expand ``${VAR}`` from."""
        env_file = self.spec.tenants[name].env_file
        if env_file is not None and not env_file.is_file():
            raise ConfigError(f"{self.source}: tenant {name!r}: env_file {env_file} is missing")
        return environment_of(env_file)


def environment_of(env_file: Path | None) -> dict[str, str]:
    """A tenant's environment: the server's ``HOME`` and its ``env_file``'s lines (the CLI
    reads a tenant's workspace with it as ``serve --tenants`` does)."""
    values: dict[str, str] = {"HOME": os.environ.get("HOME", "/root")}
    if env_file is not None:
        values.update({k: v for k, v in dotenv_values(env_file).items() if v is not None})
    return values


def _check_apart(spec: TenantsFile, source: Path) -> None:
    """Refuse workspaces that share, or hold, one another, and secrets a sandbox can read.

    A workspace inside another tenant's (its ``files/`` is that tenant's ``/workspace``)
    would let that tenant's code rewrite its ``mcp.json`` and read its skills and state;
    a token or env file under any ``files/`` is readable by that tenant's code."""
    roots = {name: t.workspace.resolve() for name, t in spec.tenants.items()}
    # Resolved too: a files/ that is a symlink (to a larger disk) is where the code writes.
    shared = {name: (root / "files").resolve() for name, root in roots.items()}
    for name, root in roots.items():
        for other, theirs in roots.items():
            if other == name:
                continue
            if root == theirs:
                raise ConfigError(f"{source}: two tenants share one workspace ({root})")
            if theirs in root.parents or root == shared[other] or shared[other] in root.parents:
                raise ConfigError(
                    f"{source}: tenant {name!r}'s workspace {root} is inside tenant "
                    f"{other!r}'s ({theirs}, files/ at {shared[other]}), where that tenant's "
                    "code or files could reach it; give each tenant a directory of its own"
                )
    for name, tenant in spec.tenants.items():
        for what in ("token_file", "env_file"):
            path: Path | None = getattr(tenant, what)
            if path is None:
                continue
            held = path.resolve()
            for other, files in shared.items():
                if held == files or files in held.parents:
                    raise ConfigError(
                        f"{source}: tenant {name!r}'s {what} {held} is under tenant "
                        f"{other!r}'s files/, which that tenant's code reads and writes as "
                        "/workspace; keep secrets outside every workspace's files/"
                    )


def _read_token(name: str, tenant: TenantSpec, env: dict[str, str]) -> str | None:
    token: str | None = None
    where = ""
    if tenant.token_env is not None:
        token, where = env.get(tenant.token_env) or None, f"${tenant.token_env}"
        if token is None:
            raise ConfigError(f"tenant {name!r}: environment variable {tenant.token_env} is unset")
    elif tenant.token_file is not None:
        where = str(tenant.token_file)
        try:
            token = tenant.token_file.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"tenant {name!r}: cannot read token_file: {exc}") from None
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"tenant {name!r}: the token in {where} is shorter than {MIN_TOKEN_CHARS} "
            "characters; make one with: python -c "
            '"import secrets; print(secrets.token_urlsafe(32))"'
        )
    return token


def load_tenants(path: Path, env: dict[str, str] | None = None) -> Tenants:
    """Read and check the tenants file (errors name the file and the field)."""
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the tenants file: {exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from None
    try:
        spec = TenantsFile.model_validate(raw)
    except ValidationError as exc:
        problems = [
            f"{path}: {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        ]
        raise ConfigError("\n".join(problems)) from None
    return Tenants(spec, path, dict(os.environ) if env is None else env)


__all__ = [
    "OAuthConfig",
    "TenantSpec",
    "Tenants",
    "TenantsFile",
    "environment_of",
    "load_tenants",
]
