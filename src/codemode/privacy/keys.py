"""The vault's key: where it comes from, and a new one (see ``codemode.privacy.vault``)."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from codemode.errors import ConfigError

from .config import KEY_ENV, VaultConfig

__all__ = ["default_key_path", "load_key", "new_key", "server_keys", "shared_key"]


def new_key() -> str:
    """A fresh Fernet key (urlsafe base64 of 32 random bytes)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii")


def default_key_path(workspace: Path, env: Mapping[str, str] | None = None) -> Path:
    """``~/.config/codemode/privacy/<name>-<hash of the workspace path>.key``."""
    env = os.environ if env is None else env
    root = Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME") or "~").expanduser() / ".config")
    digest = hashlib.sha256(str(workspace).encode()).hexdigest()[:16]
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in workspace.name)[:40]
    return root / "codemode" / "privacy" / f"{safe or 'workspace'}-{digest}.key"


def _check_key(raw: str, where: str) -> bytes:
    key = raw.strip().encode("ascii", "replace")
    try:
        if len(base64.urlsafe_b64decode(key)) == 32:
            return key
    except ValueError:
        pass
    raise ConfigError(
        f"{where}: not a privacy key (32 bytes, urlsafe base64); make one with "
        "`codemode privacy keygen`"
    )


def load_key(
    config: VaultConfig,
    workspace: Path | None,
    env: Mapping[str, str] | None = None,
    *,
    tenant: str | None = None,
) -> tuple[bytes, str]:
    """The vault key and where it came from (for ``codemode privacy status``).

    Order: ``CODEMODE_PRIVACY_KEY``, ``vault.key_file``, the default key file (created
    with mode 0600 on first use). Without a workspace and a key, a key for this process.

    For a ``tenant`` of ``serve --tenants`` (``env``: its ``env_file``): its own
    ``CODEMODE_PRIVACY_KEY`` as it is; else its ``vault.key_file`` (a path its own
    config.json chose, maybe another tenant's key file) or the server's
    ``CODEMODE_PRIVACY_KEY``, derived for it (``codemode.tenants.keys``); else the default
    key file, found as before through the server's environment (one per workspace).
    """
    env = os.environ if env is None else env
    raw = env.get(KEY_ENV)
    if raw:
        where = f"${KEY_ENV}" + (f" of tenant {tenant}'s env_file" if tenant else "")
        return _check_key(raw, where), where
    if tenant is not None:
        shared = shared_key(config)
        if shared is not None:
            from ..tenants.keys import derive

            key, where = shared
            own = derive(base64.urlsafe_b64decode(key), "privacy-vault", tenant)
            return base64.urlsafe_b64encode(own), f"{where}, derived for tenant {tenant}"
        env = os.environ  # its key file stays where it was made (the server's HOME)
    path = config.key_file
    if path is None:
        if workspace is None:
            return new_key().encode("ascii"), "process (not persisted)"
        path = default_key_path(workspace, env)
    return _read_key_file(path.expanduser())


def shared_key(config: VaultConfig) -> tuple[bytes, str] | None:
    """The server-wide key a tenant without its own key derives its key from (its
    ``vault.key_file``, else the server's ``CODEMODE_PRIVACY_KEY``), and where it is; None
    when there is none (the tenant then has a default key file of its own)."""
    if config.key_file is not None:
        return _read_key_file(config.key_file.expanduser())
    server = os.environ.get(KEY_ENV)
    if server:
        return _check_key(server, KEY_ENV), f"${KEY_ENV} of the server"
    return None


def server_keys(config: VaultConfig) -> list[tuple[bytes, str]]:
    """The keys a tenant's vault was written with before tenants had keys of their own
    (``privacy.vaultkey``): the server's ``CODEMODE_PRIVACY_KEY`` (first, as it was then),
    then ``vault.key_file`` if it exists (never created here)."""
    out: list[tuple[bytes, str]] = []
    server = os.environ.get(KEY_ENV)
    if server:
        out.append((_check_key(server, KEY_ENV), f"${KEY_ENV} of the server"))
    if config.key_file is not None and config.key_file.expanduser().exists():
        out.append(_read_key_file(config.key_file.expanduser()))
    return out


def _read_key_file(path: Path) -> tuple[bytes, str]:
    if not path.exists():
        _create_key_file(path)
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the privacy key: {exc}") from None
    if path.stat().st_mode & 0o077:
        raise ConfigError(
            f"{path}: the privacy key is readable by other users; run `chmod 600 {path}`"
        )
    return _check_key(text, str(path)), str(path)


def _create_key_file(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Unguessable and exclusive: as root, in a directory a server may write, a symlink
        # planted at a known name (it was the pid) made codemode overwrite its target.
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(new_key() + "\n")
        try:
            os.link(tmp, path)  # never replaces a key another process just created
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot create the privacy key: {exc}") from None
