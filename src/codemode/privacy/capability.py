"""Privacy as a capability: its config section, tool layer, run hook, reply layer, CLI.

Cheap to import: nothing heavy loads until privacy is enabled and first used.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..capability import Capability
from .config import KEY_ENV, PrivacyConfig

if TYPE_CHECKING:
    import click

    from ..chain import RunHook
    from ..tools.registry import Middleware


def _tool_layers(config: PrivacyConfig) -> Iterable[tuple[str, Middleware]]:
    if not config.enabled:
        return []
    from .layers import reveal_layer, tool_layer

    return [("audit", reveal_layer(config)), ("privacy", tool_layer(config))]


def _run_hooks(config: PrivacyConfig) -> Iterable[tuple[str, RunHook]]:
    if not config.enabled:
        return []
    from .layers import engine_hook, run_hook

    return [("audit", engine_hook(config)), ("privacy", run_hook(config))]


def _reply_layers(config: PrivacyConfig) -> Iterable[Any]:
    if not config.enabled:
        return []
    from .layers import reply_layer

    return [reply_layer(config)]


def _private(config: PrivacyConfig, workspace: Path) -> Iterable[Path]:
    """The vault's key file: with it, the tokens of the vault (and artifacts) decrypt."""
    return [config.vault.key_file.expanduser()] if config.vault.key_file else []


def _make_private(config: PrivacyConfig, workspace: Path) -> None:
    """A configured vault key file that does not exist yet is made now, as its first use
    would (0600): a server started before that could make it and know the key."""
    from codemode.workspace import tenant_workspace

    path = config.vault.key_file
    tenant = tenant_workspace(str(workspace))  # a tenant's key comes from its env_file
    env = tenant.environment if tenant is not None else None
    if not config.enabled or path is None or (os.environ if env is None else env).get(KEY_ENV):
        return
    if not os.path.lexists(path.expanduser()):
        from .vault import load_key

        name = tenant.settings.tenant if tenant is not None else None
        load_key(config.vault, workspace, env, tenant=name)


def _command(name: str) -> click.Command:
    from .cli import privacy

    return privacy


PRIVACY = Capability(
    name="privacy",
    config=PrivacyConfig,
    env_aliases={"enabled": ("CODEMODE_PRIVACY",)},
    tool_layers=_tool_layers,
    run_hooks=_run_hooks,
    reply_layers=_reply_layers,
    private_paths=_private,
    make_private=_make_private,
    commands={"privacy": "Personal-data tokenization: status, scan text, keys, the vault."},
    command=_command,
)
