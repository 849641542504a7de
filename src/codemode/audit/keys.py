"""The audit key: where it comes from, and the two keys derived from it.

The key never lives in the workspace (whose files an operator may hand out, and part of
which the sandbox sees): it comes from the host's environment or from a file outside the
workspace. The sandbox gets a cleared environment and sees only ``<workspace>/files``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .config import AuditConfig

MIN_KEY = 16


def config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "codemode"


def state_home() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "codemode"


def default_key_file() -> Path:
    return config_home() / "audit.key"


@dataclass(frozen=True, slots=True)
class Keys:
    """``chain`` signs each line; ``args`` hashes tool arguments; ``source`` says where the
    key came from (for messages; never the key)."""

    chain: bytes
    args: bytes
    source: str

    @classmethod
    def derive(cls, master: bytes, source: str) -> Keys:
        def sub(label: bytes) -> bytes:
            return hmac.digest(master, b"codemode-audit-" + label, hashlib.sha256)

        return cls(sub(b"chain"), sub(b"args"), source)


def load_keys(
    config: AuditConfig,
    env: Mapping[str, str] | None = None,
    *,
    tenant: str | None = None,
    log: Path | None = None,
) -> Keys:
    """The configured key (environment, ``key_file``, then the default key file).

    For a ``tenant`` of ``serve --tenants`` (``env``: its ``env_file``): ``key_env`` in its
    ``env_file`` as it is; else the key found as above in the server's environment, derived
    for it (``codemode.tenants.keys``): one key for all gave equal arguments of two tenants
    equal HMACs, and a ``key_file`` its config.json names may be another tenant's. But
    when its ``log``'s last line was signed with the server's key as it is (written before
    tenants had their own, whatever its env_file said), it keeps that key (``legacy``).
    """
    if tenant is not None:
        own, server = _tenant_keys(config, env or {}, tenant)
        if log is None or server is None:
            return own
        from .legacy import shared_if_written_so

        return shared_if_written_so(own, server, log, tenant)
    master, source = _master(config, os.environ if env is None else env)
    return Keys.derive(master, source)


def _tenant_keys(
    config: AuditConfig, env: Mapping[str, str], tenant: str
) -> tuple[Keys, Keys | None]:
    """(tenant ``tenant``'s key, the server's key as it is, which signed every tenant's
    log before tenants had their own, even one whose ``env_file`` had a key; None: none)."""
    from ..tenants.keys import derive

    try:
        master, source = _master(config, os.environ)
        server: Keys | None = Keys.derive(master, source)
    except ConfigError as exc:
        missing, server = exc, None
    raw = env.get(config.key_env)
    if raw:
        where = f"${config.key_env} of tenant {tenant}'s env_file"
        return Keys.derive(_checked(raw.strip(), where), where), server
    if server is None:
        raise ConfigError(f"{missing} (tenant {tenant}: or in its env_file)") from None
    where = f"{source}, derived for tenant {tenant}"
    return Keys.derive(derive(master, "audit", tenant), where), server


def _master(config: AuditConfig, env: Mapping[str, str]) -> tuple[bytes, str]:
    raw = env.get(config.key_env)
    if raw:
        return _checked(raw.strip(), f"${config.key_env}"), f"${config.key_env}"
    path = Path(config.key_file).expanduser() if config.key_file else default_key_file()
    if config.key_file or path.exists():
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                f"audit: cannot read the key file {path}: {exc.strerror or exc}"
            ) from None
        return _checked(text, str(path)), str(path)
    raise ConfigError(
        f"audit is enabled but has no key: set {config.key_env}, or run "
        f"`codemode audit keygen` (writes {path}), or give audit.key_file; the key must "
        "stay outside the workspace"
    )


def _checked(text: str, where: str) -> bytes:
    if len(text) < MIN_KEY:
        raise ConfigError(f"audit: the key in {where} is too short (at least {MIN_KEY} characters)")
    return text.encode()


def check_outside(path: Path, workspace: Path, what: str) -> None:
    """Refuse ``path`` inside the workspace: the key and the head must be kept apart."""
    try:
        path.resolve().relative_to(workspace.resolve())
    except ValueError:
        return
    raise ConfigError(
        f"audit: the {what} {path} is inside the workspace {workspace}; keep it outside "
        "(whoever can change the workspace could then rewrite the log undetected)"
    )


def keygen(path: Path, *, force: bool = False) -> Path:
    """Write a fresh random key to ``path`` (mode 0600, atomically)."""
    path = path.expanduser()
    if path.exists() and not force:
        raise ConfigError(f"{path} exists: pass --force to replace it (old logs then fail verify)")
    path.parent.mkdir(parents=True, exist_ok=True)
    # Unguessable and exclusive: a symlink planted at a known name is never written through.
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (secrets.token_hex(32) + "\n").encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


__all__ = [
    "Keys",
    "check_outside",
    "config_home",
    "default_key_file",
    "keygen",
    "load_keys",
    "state_home",
]
