"""``run_workflow`` on ``codemode serve``: a workflow file of the workspace (or one given
inline), run in a session of its own, progress per step, questions as MCP elicitation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from ..errors import ValidationError
from ..server.toolset import Call, Reply, ServerContext, Toolset
from .ask import Answer, Asker
from .engine import StepEvent

DESCRIPTION = (
    "Run a workflow (steps in YAML/JSON: code, tool calls, skills, questions, if/foreach) "
    "in a session of its own, durably: each step is journaled, and a run that stopped "
    "(a crash, a declined or unanswered question) resumes with resume=<run_id> without "
    "repeating finished steps. `workflow` is a file name in the workspace's workflows/ "
    "folder, or the workflow itself (an object, or YAML text)."
)


def elicitation_asker(mcp_ctx: Any) -> Asker | None:
    """Questions as MCP elicitation, when the client offers it on this connection."""
    caps = getattr(mcp_ctx, "client_capabilities", None) if mcp_ctx is not None else None
    if getattr(caps, "elicitation", None) is None:
        return None

    async def asker(message: str, schema: Mapping[str, Any]) -> Answer:
        result = await mcp_ctx.session.elicit_form(
            message, dict(schema), related_request_id=mcp_ctx.request_id
        )
        return Answer(result.action, dict(result.content or {}))

    return asker


def _source(ctx: ServerContext, workflow: str | dict[str, Any]) -> Any:
    from ..storage.base import check_name

    if isinstance(workflow, dict):
        return workflow
    if "\n" in workflow or ":" in workflow:
        return _yaml_text(workflow)
    if ctx.base is None:
        raise ValidationError("this server has no workspace to read workflow files from")
    folder = ctx.base / "workflows"
    path = folder / check_name(workflow, "workflow file name")
    if not path.is_file():
        names = sorted(p.name for p in folder.glob("*.y*ml")) if folder.is_dir() else []
        raise ValidationError(f"no workflow {workflow!r} in {folder} (there: {names or 'none'})")
    return path


MAX_TEXT = 1 << 20


def _yaml_text(text: str) -> dict[str, Any]:
    """A workflow a client sent as YAML text: at most 1 MiB, and no aliases (``*a``),
    whose expansion (a billion laughs) would cost the server far more than the text."""
    import yaml

    if len(text) > MAX_TEXT:
        raise ValidationError(f"workflow text over {MAX_TEXT} characters: save it as a file")
    try:
        if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise ValidationError("YAML aliases (*name) are not accepted in workflow text")
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValidationError(f"workflow text is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ValidationError("workflow text must be a YAML mapping")
    return data


def register(toolset: Toolset, ctx: ServerContext) -> None:
    @toolset.tool(description=DESCRIPTION)
    async def run_workflow(
        call: Call,
        workflow: Annotated[
            str | dict[str, Any] | None,
            Field(description="File name in workflows/, or the workflow (object or YAML)."),
        ] = None,
        inputs: Annotated[
            dict[str, Any] | None, Field(description="The workflow's inputs.")
        ] = None,
        resume: Annotated[str | None, Field(description="A run id to continue.")] = None,
        answers: Annotated[
            dict[str, dict[str, Any]] | None,
            Field(description="Resume: step path -> the answer to a waiting question."),
        ] = None,
        rerun: Annotated[
            list[str] | None, Field(description="Resume: unfinished steps to run again.")
        ] = None,
    ) -> Reply:
        from .runner import aresume_workflow, arun_workflow

        if (workflow is None) == (resume is None):
            raise ValidationError("give either workflow (to start a run) or resume (a run id)")
        mcp_ctx = call.mcp
        done = 0

        async def progress(event: StepEvent) -> None:
            nonlocal done
            if mcp_ctx is None or event.kind not in ("done", "replay", "fail", "skip"):
                return
            done += event.kind != "fail"
            text = f"{event.step} {event.label}: {event.kind}"
            await call.report_progress(done, None, text)

        asker = elicitation_asker(mcp_ctx)
        async with ctx.sessions.lease(None) as lease:  # one session per run
            options: dict[str, Any] = {
                "workspace": ctx.workspace,
                "session": lease.session,
                "asker": asker,
                "on_event": progress,
            }
            if resume is not None:
                result = await aresume_workflow(
                    resume, answers=answers, rerun=tuple(rerun or ()), **options
                )
            else:
                assert workflow is not None
                result = await arun_workflow(_source(ctx, workflow), inputs=inputs, **options)
        lines = [f"run {result.run_id}: {result.status}"]
        if result.error:
            lines.append(result.error)
        if result.status == "waiting":
            lines.append(f"Answer with run_workflow(resume={result.run_id!r}, answers={{...}}).")
        elif result.result is not None:
            lines.append(str(result.result)[:4000])
        return Reply("\n".join(lines), result.to_dict(), is_error=result.status == "failed")
