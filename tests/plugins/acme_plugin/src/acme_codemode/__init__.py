"""A plugin with one of each seam (codemode's plugin tests build and install it)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import click

from codemode import FileStorage, InProcessExecutor, PythonSource
from codemode.plugins import PluginAPI

VERSION = "1.2.3"


def greet(name: str, excited: bool = False) -> str:
    """Greet someone by name."""
    return f"hello {name}" + ("!" if excited else "")


def sources(workspace: Any) -> PythonSource:
    src = PythonSource("acme")
    src.add(greet)
    return src


async def stamp(call: Any, call_next: Any) -> Any:
    result = await call_next(call)
    return f"[acme] {result}" if isinstance(result, str) else result


def store(workspace: Any) -> FileStorage:
    root = Path(os.environ.get("ACME_STORE", str(workspace.path / "acme-store")))
    return FileStorage(base_path=root)


def executor(workspace: Any) -> InProcessExecutor:
    return InProcessExecutor()


class AcmeIdDetector:
    entities = ("ACME_ID",)

    def find(self, text: str) -> Any:
        for m in re.finditer(r"ACME-\d{6}", text):
            yield m.start(), m.end(), "ACME_ID"


async def shout(arguments: Any, ctx: Any) -> str:
    return str(arguments.get("text", "")).upper()


@click.command("acme-hello")
@click.argument("who", default="world")
def hello(who: str) -> None:
    """Say hello from the acme plugin."""
    click.echo(f"acme says hello to {who}")


def setup(api: PluginAPI) -> None:
    api.tool_source(sources)
    api.middleware(stamp, stage="audit")
    api.command("acme-hello", lambda: hello, "Say hello from the acme plugin.")
    api.storage("acme-store", store)
    api.executor("acme-inproc", executor)
    api.recognizer("ACME_ID", AcmeIdDetector)
    api.step_type("shout", shout)


def clash(api: PluginAPI) -> None:
    """Claims a name codemode uses: refused, and its other parts withdrawn."""
    api.storage("clash-store", store)
    api.command("run", lambda: hello, "shadows codemode run")
