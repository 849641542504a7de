"""``codemode workflow run|validate|resume|list|schema``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import CodemodeError
from ..printable import printable

BASE = click.option(
    "--base",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Workspace directory (default: $CODEMODE_BASE or ~/.codemode).",
)
EXECUTOR = click.option(
    "--executor",
    default=None,
    help="Where code steps run (default: the workspace's executor setting).",
)


@click.group("workflow")
def workflow() -> None:
    """Workflows: steps in YAML or JSON, run durably (docs/workflows.md)."""


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _pairs(items: tuple[str, ...], what: str) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.UsageError(f"{what} {item!r}: write NAME=VALUE (VALUE may be JSON)")
        out[key] = _value(value)
    return out


def _printer(quiet: bool) -> Any:
    def show(event: Any) -> None:
        if quiet:
            return
        mark = {"start": "→", "done": "✓", "fail": "✗", "replay": "↺", "skip": "⤼",
                "note": "!"}.get(event.kind, "·")  # fmt: skip
        tail = ""
        if event.kind == "fail":
            tail = f": {event.error}"
        elif event.kind == "note":
            tail = str(event.error)
        elif event.kind in ("done", "replay") and event.output is not None:
            text = json.dumps(event.output, ensure_ascii=False, default=str)
            tail = f" = {text[:80]}{'…' if len(text) > 80 else ''}"
        attempt = f" (attempt {event.attempt})" if event.attempt > 1 else ""
        click.echo(printable(f"{mark} {event.step} {event.label}{attempt}{tail}"), err=True)

    return show


def _asker(interactive: bool | None) -> Any:
    from .ask import terminal_asker

    if interactive is None:
        interactive = sys.stdin.isatty()
    return terminal_asker() if interactive else None


def _finish(result: Any, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result.to_dict(), ensure_ascii=False, default=str, indent=1))
    else:
        click.echo(f"run {result.run_id}: {result.status}", err=True)
        if result.error:
            click.echo(printable(result.error), err=True)
        if result.ok and result.result is not None:
            value = result.result
            click.echo(value if isinstance(value, str) else json.dumps(value, default=str))
    sys.exit({"succeeded": 0, "failed": 1}.get(result.status, 3))


def _run(coro: Any) -> Any:
    import anyio

    try:
        return anyio.run(lambda: coro)
    except CodemodeError as exc:
        raise click.ClickException(str(exc)) from exc


@workflow.command("run")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-i", "--input", "inputs", multiple=True, help="NAME=VALUE (VALUE may be JSON).")
@BASE
@EXECUTOR
@click.option("--json", "as_json", is_flag=True, help="Print the run's result as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
@click.option("--interactive/--no-interactive", default=None, help="Ask questions here.")
def run_cmd(file: Path, inputs: tuple[str, ...], base: Path | None, executor: str | None,
            as_json: bool, quiet: bool, interactive: bool | None) -> None:  # fmt: skip
    """Run a workflow FILE; exit 0 when it succeeds, 1 when a step failed, 3 when it
    stopped (declined, waiting for an answer, or needing a decision to resume)."""
    from .runner import arun_workflow

    result = _run(arun_workflow(
        file, inputs=_pairs(inputs, "--input"), base=base, executor=_executor(executor, base),
        asker=_asker(interactive), on_event=_printer(quiet)))  # fmt: skip
    _finish(result, as_json)


@workflow.command("resume")
@click.argument("run_id")
@BASE
@EXECUTOR
@click.option("--rerun", multiple=True, help="Run this unfinished step again (its path).")
@click.option("--skip", multiple=True, help="Go on without this unfinished step.")
@click.option("--output", "outputs", multiple=True, help="STEP=JSON: a skipped step's output.")
@click.option("--answer", multiple=True, help="STEP=JSON: the answer to a waiting question.")
@click.option("--json", "as_json", is_flag=True)
@click.option("-q", "--quiet", is_flag=True)
@click.option("--interactive/--no-interactive", default=None)
def resume_cmd(run_id: str, base: Path | None, executor: str | None, rerun: tuple[str, ...],
               skip: tuple[str, ...], outputs: tuple[str, ...], answer: tuple[str, ...],
               as_json: bool, quiet: bool, interactive: bool | None) -> None:  # fmt: skip
    """Continue RUN_ID from its first unfinished step; finished steps never run again."""
    from .runner import aresume_workflow

    given = _pairs(outputs, "--output")
    skipped = {s: given.get(s) for s in skip}
    result = _run(aresume_workflow(
        run_id, base=base, executor=_executor(executor, base), rerun=rerun, skip=skipped,
        answers=_pairs(answer, "--answer"), asker=_asker(interactive),
        on_event=_printer(quiet)))  # fmt: skip
    _finish(result, as_json)


@workflow.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
def validate_cmd(files: tuple[str, ...]) -> None:
    """Check workflow FILES against the schema; errors name file, line and field."""
    from .runner import load_workflow

    failed = False
    for f in files:
        try:
            wf, _ = load_workflow(f)
        except CodemodeError as exc:
            failed = True
            click.echo(str(exc), err=True)
        else:
            click.echo(f"{f}: ok ({wf.name}, {len(wf.steps)} steps)")
    if failed:
        sys.exit(1)


@workflow.command("list")
@BASE
@click.option("--json", "as_json", is_flag=True)
def list_cmd(base: Path | None, as_json: bool) -> None:
    """The workspace's runs: id, workflow, status, where it stopped."""
    from .runner import list_runs

    rows = _run(list_runs(base=base))
    if as_json:
        click.echo(json.dumps(rows, indent=1, default=str))
        return
    if not rows:
        click.echo("No workflow runs yet.")
    for r in rows:
        where = f" at {r['step']}" if r.get("step") else ""
        line = f"{r['run_id']}  {r['name']}  {r['status']}{where}  ({r['steps_done']} steps done)"
        click.echo(printable(line))  # names and step ids of workflows a client sent


@workflow.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of workflow files."""
    from .runner import schema

    click.echo(json.dumps(schema(), indent=1))


def _executor(name: str | None, base: Path | None) -> Any:
    if name is None:
        return None
    from ..execution import executor_by_name
    from ..workspace import Workspace

    return executor_by_name(name, workspace=Workspace.open(base))
