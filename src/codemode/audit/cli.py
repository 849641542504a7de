"""``codemode audit tail|search|verify|keygen``: the workspace's audit log from the shell.

``verify`` exits 1 when the chain is broken (an edited, deleted, inserted or cut-off line,
or a head that does not match), 0 when it is whole. It needs the key the log was written
with (the same ``CODEMODE_AUDIT_KEY`` or key file as the server).
"""

from __future__ import annotations

import json
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import click

from ..errors import CodemodeError
from ..memory.cli import base_option
from ..printable import printable

json_option = click.option("--json", "as_json", is_flag=True, help="Print the raw records.")


def _paths(
    base: Path | None, env: dict[str, str] | None = None, tenant: str | None = None
) -> tuple[Any, Path, Path]:
    """(the audit config, the log, its head file) of the workspace at ``base`` (as
    ``tenant`` of ``serve --tenants`` with its ``env_file``'s ``env``, when given)."""
    from ..workspace import Workspace
    from .config import AuditConfig
    from .trail import head_path, log_path

    try:
        ws = Workspace.open(base, env=env, tenant=tenant)
    except CodemodeError as exc:
        raise click.ClickException(str(exc)) from None
    config = ws.sections.get("audit")
    if not isinstance(config, AuditConfig):
        config = AuditConfig()
    path = log_path(config, str(ws.path))
    return config, path, head_path(config, path)


def _records(path: Path) -> Iterator[dict[str, Any]]:
    from .log import iter_records

    if not path.exists() and not path.parent.exists():
        raise click.ClickException(
            f'no audit log at {path}: turn it on with {{"audit": {{"enabled": true}}}} '
            "in the workspace's config.json"
        )
    return iter_records(path)


def _line(r: dict[str, Any]) -> str:
    kind = r.get("kind", "?")
    who = r.get("session", "-")
    if kind == "tool":
        what = f"{r.get('server')}.{r.get('tool')}"
        extra = [f"{k}={r[k]}" for k in ("policy", "approval", "bytes") if k in r]
    elif kind == "run":
        first = str(r.get("code", "")).strip().splitlines()
        what = first[0][:60] if first else f"sha256:{str(r.get('code_sha256'))[:12]}"
        extra = [f"{r.get('duration_ms')}ms"]
    else:
        what = f"{r.get('op')} {r.get('record_kind')}/{r.get('name')}"
        extra = []
    outcome = r.get("outcome", "")
    if r.get("error_type"):
        outcome = f"{outcome}:{r['error_type']}"
    tail = f"  [{' '.join(extra)}]" if extra else ""
    return f"{r.get('time', '')}  #{r.get('seq')}  {kind:<6} {outcome:<10} {who}  {what}{tail}"


def _show(records: Iterable[dict[str, Any]], as_json: bool) -> None:
    shown = False
    for r in records:
        shown = True
        # Cells' first lines, exception type names...: text the agent's code chose.
        click.echo(printable(json.dumps(r, ensure_ascii=False) if as_json else _line(r)))
    if not shown and not as_json:
        click.echo("No matching records.")


@click.group("audit")
def audit() -> None:
    """Read and verify the workspace's audit log."""


@audit.command("tail")
@base_option
@click.option("-n", "count", type=click.IntRange(min=1), default=20, show_default=True)
@json_option
def tail(base: Path | None, count: int, as_json: bool) -> None:
    """The last records of the log."""
    _, path, _ = _paths(base)
    _show(deque(_records(path), maxlen=count), as_json)


@audit.command("search")
@base_option
@click.option("--kind", type=click.Choice(["run", "tool", "memory"]), default=None)
@click.option("--session", default=None, help="A session id.")
@click.option("--run", "run_id", default=None, help="A run id.")
@click.option("--tenant", default=None)
@click.option("--tool", default=None, help="A glob on 'server.tool'.")
@click.option("--outcome", default=None, help="ok, error, denied, budget, timeout, rejected...")
@click.option("--since", default=None, help="ISO time (UTC), e.g. 2026-05-01T12:00.")
@click.option("--text", default=None, help="Text anywhere in the record (e.g. in the code).")
@click.option("-n", "count", type=click.IntRange(min=1), default=100, show_default=True)
@json_option
def search(
    base: Path | None,
    kind: str | None,
    session: str | None,
    run_id: str | None,
    tenant: str | None,
    tool: str | None,
    outcome: str | None,
    since: str | None,
    text: str | None,
    count: int,
    as_json: bool,
) -> None:
    """Records matching every filter given (the last N, oldest first)."""
    _, path, _ = _paths(base)

    def keep(r: dict[str, Any]) -> bool:
        checks = (
            (kind, r.get("kind")),
            (session, r.get("session")),
            (run_id, r.get("run")),
            (tenant, r.get("tenant")),
            (outcome, r.get("outcome")),
        )
        if any(want is not None and want != got for want, got in checks):
            return False
        if tool is not None and not fnmatchcase(f"{r.get('server')}.{r.get('tool')}", tool):
            return False
        if since is not None and str(r.get("time", "")) < since:
            return False
        return text is None or text in json.dumps(r, ensure_ascii=False)

    _show(deque(filter(keep, _records(path)), maxlen=count), as_json)


@audit.command("verify")
@base_option
@click.option(
    "--tenant",
    default=None,
    help="The workspace is this tenant's of serve --tenants: its key is its own.",
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="With --tenant: the tenant's env_file (its own audit key, if it sets one).",
)
def verify(base: Path | None, tenant: str | None, env_file: Path | None) -> None:
    """Check the HMAC chain and the head: exit 1 on an edited, deleted or cut-off line."""
    from .keys import load_keys
    from .verify import verify as check

    env: dict[str, str] | None = None
    if tenant is not None:
        from ..tenants.config import environment_of

        env = environment_of(env_file)  # as serve --tenants reads it
    elif env_file is not None:
        raise click.UsageError("--env-file is a tenant's: give --tenant too")
    config, path, head = _paths(base, env, tenant)
    try:
        keys = load_keys(config, env, tenant=tenant, log=path if tenant else None)
    except CodemodeError as exc:
        raise click.ClickException(str(exc)) from None
    report = check(path, head, keys)
    if tenant is not None:  # derived for it, or the server's kept for an older log
        report.notes.append(f"key: {keys.source}")
    if report.ok:
        click.echo(
            f"ok: {report.records} records, chain whole up to seq {report.last.seq} ({path})"
        )
    for note in report.notes:
        click.echo(f"note: {note}")
    if report.ok:
        return
    for problem in report.problems:
        click.echo(f"BROKEN: {problem}", err=True)
    click.echo(
        f"the audit log {path} does not verify: {len(report.problems)} problem(s) "
        f"in {report.records} records",
        err=True,
    )
    sys.exit(1)


@audit.command("keygen")
@click.option(
    "--file",
    "path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write it (default: ~/.config/codemode/audit.key).",
)
@click.option("--force", is_flag=True, help="Replace an existing key (old logs then fail).")
def keygen(path: Path | None, force: bool) -> None:
    """Write a new random audit key (mode 0600) outside any workspace."""
    from .keys import default_key_file
    from .keys import keygen as make

    try:
        written = make(path or default_key_file(), force=force)
    except CodemodeError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {written}")
    if path is not None:
        click.echo(f'point the workspace at it: {{"audit": {{"key_file": "{written}"}}}}')


__all__ = ["audit"]
