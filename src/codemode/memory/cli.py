"""``codemode skills|artifacts|state|deps``: the workspace's memory from the shell.

Every command takes ``--base DIR`` (default: ``$CODEMODE_BASE`` or ``~/.codemode``) and
works on the same storage the sessions use (files, or Redis if the workspace says so).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..errors import ValidationError
from ..printable import printable
from .rpc import MEMORY_METHODS

if TYPE_CHECKING:
    from .core import Memory
    from .deps import Deps

T = TypeVar("T")

base_option = click.option(
    "--base",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Workspace directory (default: $CODEMODE_BASE or ~/.codemode).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _run(base: Path | None, fn: Callable[[Memory], Awaitable[T]]) -> T:
    """Open the workspace's memory, run ``fn(memory)``, close it."""
    from ..workspace import Workspace
    from .core import Memory

    async def main() -> T:
        memory = Memory.for_workspace(Workspace.open(base))
        try:
            return await fn(memory)
        finally:
            await memory.aclose()

    return asyncio.run(main())  # errors: one path for every command (codemode.cli)


_SAME_COMMAND = {"rm": "delete", "delete": "rm"}


class MemoryGroup(click.Group):
    """A memory group: ``rm`` and ``delete`` name the same command in each (state's is
    ``delete``, as in get/set/list/delete; skills', artifacts' and deps' is ``rm``)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in _SAME_COMMAND:
            found = super().get_command(ctx, _SAME_COMMAND[cmd_name])
        return found


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def _table(rows: list[list[str]]) -> None:
    if not rows:
        return
    rows = [[printable(c) for c in r] for r in rows]  # descriptions the code wrote
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=False)] + [r[-1]]
        click.echo("  ".join(cells).rstrip())


def _listing(data: Any, as_json: bool, empty: str, rows: Callable[[], list[list[str]]]) -> None:
    """``data`` as JSON (``--json``), as a table of ``rows()``, or ``empty`` when there is none."""
    if as_json:
        _echo_json(data)
    elif not data:
        click.echo(empty)
    else:
        _table(rows())


def _short(text: str, n: int = 70) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= n else line[: n - 3] + "..."


# -- deriving commands from the table --------------------------------------------------
METHOD_OF: dict[str, str] = {}
"""``"<group> <command>"`` -> the table row (``memory.rpc``) each command calls."""

_CLICK_TYPES: dict[Any, Any] = {str: str, int: int, float: float, str | None: str}


def uses(group: click.Group, name: str, method: str) -> Callable[[click.Command], click.Command]:
    """Record which table row a hand-written command stands on."""

    def record(command: click.Command) -> click.Command:
        METHOD_OF[f"{group.name} {name}"] = method
        return command

    return record


def method_command(
    group: click.Group,
    name: str,
    method_name: str,
    show: Callable[[Any, dict[str, Any], bool], None],
    *,
    arguments: tuple[str, ...] = (),
    options: tuple[str, ...] | None = None,
    help_: str,
) -> None:
    """``codemode <group> <name>``: the row's fields as arguments (those named) or
    ``--options`` (all simple ones, or those in ``options``), then the row's handler
    through ``Method.call``, then ``show``."""
    method = MEMORY_METHODS[method_name]
    params: list[click.Parameter] = []
    for field_name, info in method.params.model_fields.items():
        if field_name in arguments:
            params.append(click.Argument([field_name]))
            continue
        ctype = _CLICK_TYPES.get(info.annotation)
        if ctype is None or (options is not None and field_name not in options):
            continue  # JSON-only fields (e.g. state.get's default) have no option
        params.append(
            click.Option(
                [f"--{field_name.replace('_', '-')}", field_name],
                type=ctype,
                default=info.get_default(),
                show_default=info.get_default() not in (None, ""),
                help=info.description,
            )
        )

    def callback(base: Path | None, as_json: bool, **values: Any) -> None:
        args = {k: v for k, v in values.items() if v is not None}
        show(_run(base, lambda m: method.call(m, args)), args, as_json)

    command = click.Command(name, callback=callback, params=params, help=help_)
    base_option(json_option(command))
    group.add_command(command)
    METHOD_OF[f"{group.name} {name}"] = method_name


def _deleted(what: str) -> Callable[[Any, dict[str, Any], bool], None]:
    def show(deleted: Any, args: dict[str, Any], as_json: bool) -> None:
        key = args.get("name", args.get("key"))
        if not deleted:
            raise click.ClickException(f"no {what} named {key!r}")
        click.echo(f"deleted {what} {key}")

    return show


# -- skills ------------------------------------------------------------------------------
@click.group(cls=MemoryGroup)
def skills() -> None:
    """Saved skills: reusable code the agent invokes as skills.<name>(...)."""


def _warn_unreadable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Report unreadable entries on stderr (with their path and the fix); return the rest."""
    for r in rows:
        if "error" in r:
            click.echo(f"warning: {r['error']}", err=True)
    return [r for r in rows if "error" not in r]


def _skill_rows(rows: Any, args: dict[str, Any], as_json: bool) -> None:
    shown = rows if as_json else _warn_unreadable(rows)
    _listing(
        shown,
        as_json,
        "(no skills)",
        lambda: [
            [r["name"], f"v{r.get('version', '?')}", _short(r.get("description", ""))]
            for r in shown
        ],
    )


def _skill_shown(row: Any, args: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _echo_json(row)
        return
    click.echo(row["skill_md"])
    click.echo(f"# {row['signature']}  (version {row['version']})")
    click.echo(row["code"].rstrip())


method_command(
    skills, "list", "skills.list", _skill_rows, help_="List skills (name, version, description)."
)
method_command(
    skills,
    "search",
    "skills.search",
    _skill_rows,
    arguments=("query",),
    help_="Find skills by what they do.",
)
method_command(
    skills,
    "show",
    "skills.get",
    _skill_shown,
    arguments=("name",),
    help_="Print a skill's SKILL.md and code.",
)
method_command(
    skills,
    "rm",
    "skills.delete",
    _deleted("skill"),
    arguments=("name",),
    help_="Delete a skill and its kept versions (also: delete).",
)


def _read_skill_source(path: Path) -> tuple[dict[str, Any], str, str]:
    """(front matter, notes, code) from a .py file or a folder with SKILL.md and code."""
    from .skills import parse_skill_md

    if path.is_dir():
        md = path / "SKILL.md"
        front, notes = parse_skill_md(md.read_text()) if md.exists() else ({}, "")
        candidates = [path / "run.py", path / "skill.py", *sorted(path.glob("*.py"))]
        code_file = next((c for c in candidates if c.is_file()), None)
        if code_file is None:
            raise ValidationError(f"{path} has no .py file with the skill's run()")
        return front, notes, code_file.read_text()
    if not path.is_file():
        raise ValidationError(f"{path} does not exist")
    return {}, "", path.read_text()


@uses(skills, "add", "skills.create")
@skills.command("add")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--name", help="Skill name (default: SKILL.md's name or the file name).")
@click.option("--description", help="What it does (default: SKILL.md or run's docstring).")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--replace", is_flag=True, help="Update the skill if it exists (keeps history).")
@base_option
def skills_add(
    path: Path,
    name: str | None,
    description: str | None,
    tags: tuple[str, ...],
    replace: bool,
    base: Path | None,
) -> None:
    """Add a skill from a .py file, or a folder holding SKILL.md and the code."""
    try:
        front, notes, code = _read_skill_source(path)
    except (OSError, ValidationError) as exc:
        raise click.ClickException(str(exc)) from None
    skill_name = name or front.get("name") or path.stem.replace("-", "_")

    async def add(m: Memory) -> Any:
        return await m.skills.create(
            str(skill_name),
            code,
            description or str(front.get("description", "")),
            parameters=front.get("parameters"),
            tags=list(tags) or front.get("tags"),
            notes=notes,
            replace=replace,
        )

    skill = _run(base, add)
    click.echo(f"saved skill {skill.name} v{skill.version}: {skill.signature}")


# -- artifacts ---------------------------------------------------------------------------
@click.group(cls=MemoryGroup)
def artifacts() -> None:
    """Saved artifacts: named data kept across sessions."""


def _artifact_rows(rows: Any, args: dict[str, Any], as_json: bool) -> None:
    shown = rows if as_json else _warn_unreadable(rows)
    _listing(
        shown,
        as_json,
        "(no artifacts)",
        lambda: [
            [r["name"], r["type"], str(r["size"]), r["created"], _short(r["description"], 50)]
            for r in shown
        ],
    )


method_command(
    artifacts,
    "list",
    "artifacts.list",
    _artifact_rows,
    help_="List artifacts (name, type, size, created, description) without loading them.",
)
method_command(
    artifacts,
    "rm",
    "artifacts.delete",
    _deleted("artifact"),
    arguments=("name",),
    help_="Delete an artifact (also: delete).",
)


@uses(artifacts, "show", "artifacts.load")
@artifacts.command("show")
@click.argument("name")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file.")
@base_option
def artifacts_show(name: str, out: Path | None, base: Path | None) -> None:
    """Print an artifact (text and JSON as text; bytes go to --out or a binary stdout)."""

    async def show(m: Memory) -> None:
        if out is None and sys.stdout.isatty():
            info = await m.artifacts.info(name)
            if info["type"] == "bytes":
                raise click.ClickException(f"{name} holds {info['size']} bytes; use --out FILE")
        info, chunks = await m.artifacts.stream(name)
        if out is not None:
            with out.open("wb") as f:
                async for chunk in chunks:
                    f.write(chunk)
            click.echo(f"wrote {info['size']} bytes ({info['type']}) to {out}", err=True)
            return
        stream = sys.stdout.buffer
        async for chunk in chunks:
            stream.write(chunk)
        if info["type"] != "bytes":
            stream.write(b"\n")
        stream.flush()

    _run(base, show)


# -- state ------------------------------------------------------------------------------
@click.group(cls=MemoryGroup)
def state() -> None:
    """The workspace's state: one small JSON object, the same the code reads as state.

    \b
    codemode state set cursor 42            (VALUE is JSON: 42, '"text"', '{"a": [1]}')
    codemode state set note "hi" --string   (VALUE as text; '-' reads VALUE from stdin)
    codemode state get cursor               (prints JSON; no KEY: the whole state)
    codemode state list [--json]
    codemode state delete cursor            (also: rm)
    """


def _state_rows(doc: Any, args: dict[str, Any], as_json: bool) -> None:
    _listing(
        doc,
        as_json,
        "(no state)",
        lambda: [[k, _short(json.dumps(v, ensure_ascii=False))] for k, v in doc.items()],
    )


def _no_key(key: str, doc: dict[str, Any]) -> click.ClickException:
    """ "no key" with the closest key, else the keys there are."""
    from ..config.messages import did_you_mean

    hint = did_you_mean(key, doc)
    if not hint:
        keys = sorted(doc)
        more = ", ..." if len(keys) > 10 else ""
        hint = f" (its keys: {', '.join(keys[:10])}{more})" if keys else " (the state is empty)"
    return click.ClickException(f"the state has no key {key!r}{hint}")


def _state_deleted(left: Any, args: dict[str, Any], as_json: bool) -> None:
    if left is not None:
        raise _no_key(args["key"], left)
    click.echo(f"deleted {args['key']}")


method_command(
    state,
    "list",
    "state.get",
    _state_rows,
    options=(),
    help_="List the state's keys with a short view of each value.",
)


@uses(state, "delete", "state.delete")
@state.command("delete")
@click.argument("key")
@base_option
def state_delete(key: str, base: Path | None) -> None:
    """Delete one key (also: rm)."""

    async def delete(m: Memory) -> dict[str, Any] | None:
        if await m.state.delete(key):
            return None
        left: dict[str, Any] = await m.state.get()
        return left

    _state_deleted(_run(base, delete), {"key": key}, False)


@uses(state, "get", "state.get")
@state.command("get")
@click.argument("key", required=False)
@base_option
def state_get(key: str | None, base: Path | None) -> None:
    """Print KEY's value as JSON (no KEY: the whole state)."""
    doc: dict[str, Any] = _run(base, lambda m: m.state.get())
    if key is None:
        _echo_json(doc)
    elif key not in doc:
        raise _no_key(key, doc)
    else:
        _echo_json(doc[key])


@uses(state, "set", "state.set")
@state.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--string", "as_string", is_flag=True, help="Store VALUE as text, not JSON.")
@base_option
def state_set(key: str, value: str, as_string: bool, base: Path | None) -> None:
    """Set KEY to VALUE, read as JSON (42, '"text"', '{"a": 1}'); '-' reads stdin."""
    text = sys.stdin.read() if value == "-" else value
    data: Any = text
    if not as_string:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            looks_json = text.lstrip()[:1] in ("[", "{", '"')
            why = f" ({exc.msg} at column {exc.colno})" if looks_json else ""
            quote = "" if looks_json else f"; a JSON string is quoted: '\"{_short(text, 20)}\"'"
            raise click.BadParameter(
                f"{_short(text, 40)!r} is not JSON{why}. To store it as text, add --string{quote}",
                param_hint="VALUE",
            ) from None
    _run(base, lambda m: m.state.set(key, data))
    click.echo(f"set {key}")


# -- deps --------------------------------------------------------------------------------
@click.group(cls=MemoryGroup)
def deps() -> None:
    """Packages installed for the agent's code (in <base>/deps, not codemode's env)."""


def _need_deps(m: Memory) -> Deps:
    if m.deps is None:
        raise click.ClickException("this workspace has no deps directory")
    return m.deps


def _dep_rows(rows: Any, args: dict[str, Any], as_json: bool) -> None:
    _listing(
        rows,
        as_json,
        "(no packages)",
        lambda: [[r["spec"], r["version"] or "(not installed)"] for r in rows],
    )


def _synced(result: Any, args: dict[str, Any], as_json: bool) -> None:
    click.echo(f"installed {len(result['installed'])} package(s) into {result['site']}")


method_command(
    deps,
    "list",
    "deps.list",
    _dep_rows,
    help_="List the packages asked for and the versions installed.",
)
method_command(
    deps,
    "sync",
    "deps.sync",
    _synced,
    help_="Reinstall exactly the listed packages (drops leftovers).",
)


@uses(deps, "add", "deps.add")
@deps.command("add")
@click.argument("specs", nargs=-1, required=True)
@base_option
def deps_add(specs: tuple[str, ...], base: Path | None) -> None:
    """Install packages, e.g. ``codemode deps add 'requests>=2' six``."""

    async def add(m: Memory) -> list[Any]:
        return [await _need_deps(m).add(spec, runtime=False) for spec in specs]

    for info in _run(base, add):
        click.echo(f"installed {info['name']} {info['version']}")


@uses(deps, "rm", "deps.remove")
@deps.command("rm")
@click.argument("names", nargs=-1, required=True)
@base_option
def deps_rm(names: tuple[str, ...], base: Path | None) -> None:
    """Uninstall packages (what they pulled in goes at the next sync; also: delete)."""

    async def rm(m: Memory) -> list[bool]:
        return [await _need_deps(m).remove(name, runtime=False) for name in names]

    for name, removed in zip(names, _run(base, rm), strict=True):
        click.echo(f"removed {name}" if removed else f"{name} was not installed")
