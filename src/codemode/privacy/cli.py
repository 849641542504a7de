"""``codemode privacy``: see what privacy does, try detectors on text, manage the key."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from codemode.context import CallContext
from codemode.errors import CodemodeError

if TYPE_CHECKING:
    from codemode.workspace import Workspace

    from .config import PrivacyConfig
    from .engine import Privacy

BASE = click.option(
    "--base",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Workspace directory (default: $CODEMODE_BASE or ~/.codemode).",
)


TENANT = click.option(
    "--tenant",
    default=None,
    help="The workspace is this tenant's of serve --tenants (its vault, its key).",
)
ENV_FILE = click.option(
    "--env-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="With --tenant: the tenant's env_file (its settings and key, if it sets them).",
)


def _open(
    base: Path | None, tenant: str | None = None, env_file: Path | None = None
) -> tuple[Workspace, PrivacyConfig]:
    from codemode.workspace import Workspace

    from .config import PrivacyConfig

    if tenant is None:
        if env_file is not None:
            raise click.UsageError("--env-file is a tenant's: give --tenant too")
        ws = Workspace.open(base)
    else:
        from codemode.tenants.config import environment_of

        ws = Workspace.open(base, env=environment_of(env_file), tenant=tenant)
        ws.serve_as_tenant()  # read as serve --tenants reads it: its key, its vault
    cfg = ws.sections.get("privacy")
    assert isinstance(cfg, PrivacyConfig)
    return ws, cfg


def _engine(
    base: Path | None, tenant: str | None = None, env_file: Path | None = None
) -> tuple[Workspace, PrivacyConfig, Privacy]:
    from .layers import engine_for

    ws, cfg = _open(base, tenant, env_file)
    context = CallContext(tenant=ws.settings.tenant, workspace=str(ws.path))
    return ws, cfg, engine_for(cfg, context)


@click.group("privacy")
def privacy() -> None:
    """Personal-data tokenization (docs/privacy.md)."""


@privacy.command("status")
@BASE
@TENANT
@ENV_FILE
def status(base: Path | None, tenant: str | None, env_file: Path | None) -> None:
    """Whether privacy is on, the key's location, the vault and the sinks."""
    from codemode.workspace import tenant_workspace

    from .layers import vault_dir, vault_store
    from .vaultkey import store_name, stranded

    try:
        ws, cfg, engine = _engine(base, tenant, env_file)
        own = tenant_workspace(str(ws.path)) if tenant is not None else None
        key, where, store = vault_store(cfg, ws.path, ws.settings, ws.settings.tenant, own)
    except CodemodeError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"privacy: {'on' if cfg.enabled else 'off'} (config.json 'privacy', "
        "CODEMODE_PRIVACY=1 or serve --privacy)"
    )
    active = [e for e in engine.scanner.entities if e != "SECRET"]
    click.echo(f"entities: {', '.join(active)}; action: {cfg.action}")
    click.echo(f"key: {where}")
    click.echo(
        f"vault: {store_name(store)} ({len(engine.vault)} tokens, "
        f"scope {cfg.vault.scope}, ttl {cfg.vault.ttl})"
    )
    if own is not None:
        told = stranded(store, key, vault_dir(ws.path, ws.settings.tenant), ws.path, tenant or "")
        if told is not None:
            click.echo(f"WARNING: {told}")
    for name, sink in engine.sinks.describe().items():
        click.echo(f"server {name}: {'sink (receives real values)' if sink else 'not a sink'}")


@privacy.command("scan")
@BASE
@click.argument("file", type=click.File("r", encoding="utf-8", errors="replace"), default="-")
@click.option("--json", "as_json", is_flag=True, help="List detections as JSON.")
def scan(base: Path | None, file: TextIO, as_json: bool) -> None:
    """Show what the detectors find in FILE (or stdin); nothing is stored."""
    try:
        _, _, engine = _engine(base)
    except CodemodeError as exc:
        raise click.ClickException(str(exc)) from exc
    text = file.read()
    spans = engine.scanner.spans(text)
    if as_json:
        rows = [{"entity": s.entity, "start": s.start, "end": s.end} for s in spans]
        click.echo(json.dumps(rows))
        return
    click.echo(engine.redact(text), nl=False)
    counts: dict[str, int] = {}
    for s in spans:
        counts[s.entity] = counts.get(s.entity, 0) + 1
    summary = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())) or "nothing"
    click.echo(f"\nfound: {summary}", err=True)


@privacy.command("reveal")
@BASE
@TENANT
@ENV_FILE
@click.argument("text", required=False)
def reveal(base: Path | None, tenant: str | None, env_file: Path | None, text: str | None) -> None:
    """Print TEXT (or stdin) with the workspace's tokens replaced by real values.

    For the operator on the host: it reads the vault with the key. Unknown tokens stay.
    """
    from .tokens import TOKEN_RE

    try:
        _, _, engine = _engine(base, tenant, env_file)
    except CodemodeError as exc:
        raise click.ClickException(str(exc)) from exc
    source = text if text is not None else sys.stdin.read()
    click.echo(TOKEN_RE.sub(lambda m: engine.vault.value(m.group()) or m.group(), source))


@privacy.command("rekey")
@BASE
@click.option("--tenant", required=True, help="The tenant of serve --tenants whose vault it is.")
@ENV_FILE
def rekey(base: Path | None, tenant: str, env_file: Path | None) -> None:
    """Move a tenant's vault written with the server's key to a key of its own (the
    server's derived for it), keeping its tokens. Stop codemode serve first."""
    from .rekey import rekey as move

    try:
        ws, cfg = _open(base, tenant, env_file)
        done = move(cfg.vault, ws.path, ws.settings, ws.environment or {}, ws.settings.tenant)
    except CodemodeError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(done)


@privacy.command("keygen")
def keygen() -> None:
    """Print a new key (for CODEMODE_PRIVACY_KEY or privacy.vault.key_file)."""
    from .vault import new_key

    click.echo(new_key())


@privacy.command("eval")
@click.argument("corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@BASE
def evaluate(corpus: Path, base: Path | None) -> None:
    """Recall and precision of the configured detectors on a labelled JSONL corpus."""
    from .engine import build_scanner
    from .quality import load_corpus, score

    try:
        _, cfg = _open(base)
        scanner = build_scanner(cfg)
    except CodemodeError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(score(scanner, load_corpus(corpus)).table())
