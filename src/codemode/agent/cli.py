"""``codemode task "..."``: run one task with the workspace's model, showing each step live.

Steps (the model's code, its output or error) go to stderr as they happen; the final
answer goes to stdout (``--json``: the whole ``TaskResult``). Exit status 0 on success,
1 when the task did not succeed, 2 for bad usage or configuration.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..cli import terminal_text
from ..printable import terminal_output
from .display import render_event
from .loop import AgentEvent

_STYLE = {
    "code": "cyan",
    "output": None,
    "answer": "green",
    "stopped": "red",
    "model": "bright_black",
}


def _show(event: AgentEvent) -> None:
    line = render_event(event)
    colour = "red" if event.kind == "output" and not event.ok else _STYLE.get(event.kind)
    click.echo(click.style(line, fg=colour) if colour else line, err=True)


@click.command("task")
@click.argument("task")
@click.option(
    "--base",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Workspace directory (default: $CODEMODE_BASE or ~/.codemode).",
)
@click.option(
    "--executor",
    type=click.Choice(["sandbox", "subprocess", "inprocess"]),
    default=None,
    help="Where the model's code runs (default: the workspace's setting, the sandbox).",
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Read LLM settings from this .env file (default: <base>/.env; never ./.env).",
)
@click.option("--provider", default=None, help="openai, azure_openai, anthropic or none.")
@click.option("--model", default=None, help="Model name (Azure: deployment).")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, help="Most model turns.")
@click.option(
    "--mode",
    type=click.Choice(["auto", "tools", "fenced"]),
    default=None,
    help="tools: native run_code tool calls; fenced: ```python blocks.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Do not show the steps.")
def task(
    task: str,
    base: Path | None,
    executor: str | None,
    env_file: Path | None,
    provider: str | None,
    model: str | None,
    max_steps: int | None,
    mode: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Let the configured model complete TASK by writing code in a session.

    \b
    OPENAI_API_KEY=... codemode task "How many notes mention Paris?"
    codemode task --provider anthropic --max-steps 5 "Summarise todo.md"
    """
    from .agent import create_agent

    settings: dict[str, Any] = {
        "base": base,
        "executor": executor,
        "env_file": env_file,
        "llm_provider": provider,
        "llm_model": model,
        "llm_max_steps": max_steps,
        "llm_mode": mode,
    }
    agent = create_agent(**{k: v for k, v in settings.items() if v is not None})
    with agent:
        if not quiet:
            where = agent.model.model if agent.model is not None else "no model: skills only"
            click.echo(
                click.style(f"codemode task ({agent.provider}: {where})", bold=True), err=True
            )
        result = agent.execute_task(task, on_event=None if quiet else _show)
    if as_json:
        # \uXXXX for C1 controls and bidi overrides: the same JSON value, inert on a terminal
        text = json.dumps(result.to_dict(), ensure_ascii=False, indent=2, default=str)
        click.echo(terminal_text(text))
    elif result.success:
        answer = result.result
        text = answer if isinstance(answer, str) else json.dumps(answer, default=str)
        # the answer quotes what the code handled: its control characters are escaped
        click.echo(terminal_output(text))
    if not quiet:
        u = result.usage
        summary = (
            f"{len(result.steps)} steps, {len(result.tool_calls)} tool calls, "
            f"{u.input_tokens} tokens in / {u.output_tokens} out, {result.duration_ms / 1000:.1f} s"
        )
        click.echo(click.style(summary, fg="bright_black"), err=True)
    if not result.success:
        if not as_json:
            click.echo(
                click.style(f"error: {terminal_text(str(result.error))}", fg="red"), err=True
            )
        sys.exit(1)
