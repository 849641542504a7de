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


# -- skills ------------------------------------------------------------------------------
@click.group(cls=MemoryGroup)
def skills() -> None:
    """Saved skills: reusable code the agent invokes as skills.<name>(...)."""


def _print_skill_rows(rows: list[dict[str, Any]], as_json: bool) -> None:
    _listing(
        rows,
        as_json,
        "(no skills)",
        lambda: [
            [r["name"], "!", f"unreadable: {r['error']}"]
            if "error" in r
            else [r["name"], f"v{r.get('version', '?')}", _short(r.get("description", ""))]
            for r in rows
        ],
    )


@skills.command("list")
@base_option
@json_option
def skills_list(base: Path | None, as_json: bool) -> None:
    """List skills (name, version, description)."""
    _print_skill_rows(_run(base, lambda m: m.skills.list()), as_json)


@skills.command("search")
@click.argument("query")
@click.option("--limit", default=10, show_default=True)
@base_option
@json_option
def skills_search(query: str, limit: int, base: Path | None, as_json: bool) -> None:
    """Find skills by what they do."""
    _print_skill_rows(_run(base, lambda m: m.skills.search(query, limit)), as_json)


@skills.command("show")
@click.argument("name")
@base_option
@json_option
def skills_show(name: str, base: Path | None, as_json: bool) -> None:
    """Print a skill's SKILL.md and code."""

    async def get(m: Memory) -> Any:
        return await m.skills.get(name)

    skill = _run(base, get)
    if as_json:
        _echo_json(skill.to_dict())
        return
    click.echo(skill.skill_md())
    click.echo(f"# {skill.signature}  (version {skill.version})")
    click.echo(skill.code.rstrip())


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


@skills.command("rm")
@click.argument("name")
@base_option
def skills_rm(name: str, base: Path | None) -> None:
    """Delete a skill and its kept versions (also: delete)."""
    if not _run(base, lambda m: m.skills.delete(name)):
        raise click.ClickException(f"no skill named {name!r}")
    click.echo(f"deleted skill {name}")


# -- artifacts ---------------------------------------------------------------------------
@click.group(cls=MemoryGroup)
def artifacts() -> None:
    """Saved artifacts: named data kept across sessions."""


@artifacts.command("list")
@base_option
@json_option
def artifacts_list(base: Path | None, as_json: bool) -> None:
    """List artifacts (name, type, size, created, description) without loading them."""
    rows = _run(base, lambda m: m.artifacts.list())
    _listing(
        rows,
        as_json,
        "(no artifacts)",
        lambda: [
            [r["name"], r["type"], "!", f"unreadable: {r['error']}"]
            if "error" in r
            else [r["name"], r["type"], str(r["size"]), r["created"], _short(r["description"], 50)]
            for r in rows
        ],
    )


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


@artifacts.command("rm")
@click.argument("name")
@base_option
def artifacts_rm(name: str, base: Path | None) -> None:
    """Delete an artifact (also: delete)."""
    if not _run(base, lambda m: m.artifacts.delete(name)):
        raise click.ClickException(f"no artifact named {name!r}")
    click.echo(f"deleted artifact {name}")


# -- state --------------------------------------------------------------------------------
@click.group(cls=MemoryGroup)
def state() -> None:
    """The workspace's state: one small JSON object, the same the code reads as state.

    \b
    codemode state set cursor 42            (VALUE is JSON: 42, '"text"', '{"a": [1]}')
    codemode state set note "hi" --string   (VALUE as text)
    codemode state get cursor               (prints JSON; no KEY: the whole state)
    codemode state list [--json]
    codemode state delete cursor            (also: rm)
    """


@state.command("list")
@base_option
@json_option
def state_list(base: Path | None, as_json: bool) -> None:
    """List the state's keys with a short view of each value (--json: the whole state)."""
    doc = _run(base, lambda m: m.state.get())
    _listing(
        doc,
        as_json,
        "(no state)",
        lambda: [[k, _short(json.dumps(v, ensure_ascii=False))] for k, v in doc.items()],
    )


def _no_key(key: str, doc: dict[str, Any]) -> click.ClickException:
    from ..config.messages import did_you_mean

    hint = did_you_mean(key, doc)
    if not hint:
        keys = sorted(doc)
        hint = f" (its keys: {', '.join(keys[:10])}{', ...' if len(keys) > 10 else ''})"
        hint = hint if keys else " (the state is empty)"
    return click.ClickException(f"the state has no key {key!r}{hint}")


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


@state.command("delete")
@click.argument("key")
@base_option
def state_delete(key: str, base: Path | None) -> None:
    """Delete one key (also: rm)."""

    async def delete(m: Memory) -> dict[str, Any] | None:
        if await m.state.delete(key):
            return None
        doc: dict[str, Any] = await m.state.get()
        return doc

    left = _run(base, delete)
    if left is not None:
        raise _no_key(key, left)
    click.echo(f"deleted {key}")


# -- deps --------------------------------------------------------------------------------
@click.group(cls=MemoryGroup)
def deps() -> None:
    """Packages installed for the agent's code (in <base>/deps, not codemode's env)."""


def _need_deps(m: Memory) -> Deps:
    if m.deps is None:
        raise click.ClickException("this workspace has no deps directory")
    return m.deps


@deps.command("list")
@base_option
@json_option
def deps_list(base: Path | None, as_json: bool) -> None:
    """List the packages asked for and the versions installed."""
    rows = _run(base, lambda m: _need_deps(m).list())
    _listing(
        rows,
        as_json,
        "(no packages)",
        lambda: [[r["spec"], r["version"] or "(not installed)"] for r in rows],
    )


@deps.command("add")
@click.argument("specs", nargs=-1, required=True)
@base_option
def deps_add(specs: tuple[str, ...], base: Path | None) -> None:
    """Install packages, e.g. ``codemode deps add 'requests>=2' six``."""

    async def add(m: Memory) -> list[Any]:
        return [await _need_deps(m).add(spec, runtime=False) for spec in specs]

    for info in _run(base, add):
        click.echo(f"installed {info['name']} {info['version']}")


@deps.command("rm")
@click.argument("names", nargs=-1, required=True)
@base_option
def deps_rm(names: tuple[str, ...], base: Path | None) -> None:
    """Uninstall packages (what they pulled in goes at the next sync; also: delete)."""

    async def rm(m: Memory) -> list[bool]:
        return [await _need_deps(m).remove(name, runtime=False) for name in names]

    for name, removed in zip(names, _run(base, rm), strict=True):
        click.echo(f"removed {name}" if removed else f"{name} was not installed")


@deps.command("sync")
@base_option
def deps_sync(base: Path | None) -> None:
    """Reinstall exactly the listed packages (drops leftovers)."""
    result = _run(base, lambda m: _need_deps(m).sync())
    click.echo(f"installed {len(result['installed'])} package(s) into {result['site']}")
