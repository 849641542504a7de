"""``create_agent`` / ``execute_task``: one call from a task to an answer.

An ``Agent`` owns a model (or none: the rule-based fallback) and one session that
persists across its tasks. The blocking methods run on the agent's own event loop; the
``a``-prefixed twins run on the caller's loop. An agent keeps to the loop it first ran
on, since its session's worker pipes belong to that loop.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, Literal

from codemode.errors import ConfigError

from .config import LLMConfig, ResolvedLLM, resolve_llm_config
from .fallback import rule_based
from .loop import AgentEvent, EventHandler, Limits, run_task
from .messages import Model
from .result import TaskResult

# create_agent() arguments that are not LLM settings.
_AGENT_ARGS = frozenset(
    {"base", "workspace_dir", "executor", "session", "llm", "env_file", "env", "model_client"}
)
# Limits accepted without the llm_ prefix, as in the seeds' examples.
_LIMIT_ARGS = frozenset(
    {"max_steps", "max_total_tokens", "max_seconds", "run_timeout", "mode", "temperature"}
)


class Agent:
    """A model, a persistent session, and the loop between them."""

    def __init__(
        self,
        llm: ResolvedLLM,
        *,
        model: Model | None,
        base: str | os.PathLike[str] | None = None,
        executor: Any = None,
        session: Any = None,
    ) -> None:
        self.llm = llm
        self.model = model
        self._base = base
        self._executor = executor
        self._session = session
        self._owns_session = session is None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: asyncio.Runner | None = None
        self._closed = False

    @property
    def config(self) -> LLMConfig:
        return self.llm.config

    @property
    def provider(self) -> str:
        return self.model.provider if self.model is not None else "none"

    # -- the session -------------------------------------------------------------------
    async def session(self) -> Any:
        """The agent's session (opened on first use, on the workspace's executor)."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise ConfigError(
                "this agent's session belongs to another event loop: use the blocking "
                "methods or the async ones (aexecute_task), not both; or create one agent each"
            )
        if self._closed:
            raise ConfigError("this agent is closed; create a new one")
        if self._session is None:
            from codemode.session import Session

            self._session = Session.from_base(self._base, executor=self._resolve_executor())
        await self._session.start()
        return self._session

    def _resolve_executor(self) -> Any:
        if self._executor is None or not isinstance(self._executor, str):
            return self._executor
        from codemode.execution import executor_by_name
        from codemode.workspace import Workspace

        return executor_by_name(self._executor, workspace=Workspace.open(self._base))

    # -- tasks -------------------------------------------------------------------------
    def limits(self, **overrides: Any) -> tuple[Limits, list[str]]:
        """The configured limits with a task's ``overrides``: these may lower a bound, not
        raise it past the configuration (the notes say which were cut)."""
        cfg = self.config
        values: dict[str, Any] = {
            "max_steps": cfg.max_steps,
            "max_total_tokens": cfg.max_total_tokens,
            "max_seconds": cfg.max_seconds,
            "max_tokens": cfg.max_tokens,
            "temperature": cfg.temperature,
        }
        run_timeout = cfg.run_timeout or getattr(self._session, "default_timeout", None)
        if run_timeout:
            values["run_timeout"] = float(run_timeout)
        return Limits(**values).tightened(**overrides)

    async def aexecute_task(
        self,
        task: str,
        *,
        on_event: EventHandler | None = None,
        verbose: bool = False,
        mode: Literal["auto", "tools", "fenced"] | None = None,
        **limits: Any,
    ) -> TaskResult:
        """Run ``task`` to an answer; failures come back in the result (never raised),
        except configuration mistakes, which raise ``ConfigError``."""
        if not isinstance(task, str) or not task.strip():
            raise ConfigError("execute_task needs a task: a non-empty string")
        unknown = set(limits) - {f.name for f in Limits.__dataclass_fields__.values()}
        if unknown:
            raise ConfigError(f"unknown execute_task option(s): {', '.join(sorted(unknown))}")
        session = await self.session()
        handler = on_event if not verbose else _verbose(on_event)
        if self.model is None:
            return await rule_based(task, session)
        lim, notes = self.limits(**limits)
        result = await run_task(
            self.model, session, task, limits=lim, mode=mode or self.config.mode, on_event=handler
        )
        result.notes += notes
        return result

    def execute_task(self, task: str, **options: Any) -> TaskResult:
        """Blocking twin of :meth:`aexecute_task` (for scripts, not for async code)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise ConfigError(
                "execute_task() blocks; inside async code use `await agent.aexecute_task(...)`"
            )
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(self.aexecute_task(task, **options))

    # -- closing -----------------------------------------------------------------------
    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._owns_session and self._session is not None:
                await self._session.close()
        finally:
            if self.model is not None:
                await self.model.aclose()

    def close(self) -> None:
        if self._runner is not None:
            try:
                self._runner.run(self.aclose())
            finally:
                self._runner.close()
                self._runner = None
        elif not self._closed and self._loop is None:
            asyncio.run(self.aclose())

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        model = self.model.model if self.model is not None else "rule-based"
        return f"Agent(provider={self.provider!r}, model={model!r})"


def _verbose(inner: EventHandler | None) -> EventHandler:
    async def show(event: AgentEvent) -> None:
        from .display import render_event

        line = render_event(event)
        if line:
            print(line, file=sys.stderr, flush=True)
        if inner is not None:
            from .loop import emit

            await emit(inner, event)

    return show


def create_agent(**config: Any) -> Agent:
    """An agent from keyword settings, without any file needed.

    ``base`` (or the seeds' ``workspace_dir``): the workspace (default ``~/.codemode``);
    ``executor``: ``"sandbox"`` (default), ``"subprocess"``, ``"inprocess"`` or an
    ``Executor``; ``session``: an existing ``Session`` to run in; ``env_file``: a .env to
    read; LLM settings as ``llm_provider=``, ``llm_model=``, ``llm_api_key=``,
    ``llm_azure_endpoint=``, ``llm_azure_deployment=``, ``llm_temperature=``,
    ``llm_max_tokens=``... (see ``LLMConfig``), or ``llm=LLMConfig(...)``; limits as
    ``max_steps=``, ``max_seconds=``, ``max_total_tokens=``, ``run_timeout=``.
    """
    own = {k: config.pop(k) for k in list(config) if k in _AGENT_ARGS}
    llm_args = {(k if k.startswith("llm_") else f"llm_{k}"): v for k, v in config.items()}
    unknown = [k for k in config if not k.startswith("llm_") and k not in _LIMIT_ARGS]
    if unknown:
        raise ConfigError(
            f"unknown create_agent argument(s): {', '.join(sorted(unknown))}; LLM settings "
            "are llm_<field> (llm_provider, llm_model, llm_api_key, ...)"
        )
    base = own.get("base", own.get("workspace_dir"))
    if base is None and own.get("session") is not None:
        resolved = resolve_llm_config(
            None,
            env=own.get("env"),
            env_file=own.get("env_file"),
            config=own.get("llm"),
            **llm_args,
        )
    else:
        from codemode.workspace import Workspace, default_base

        root = Workspace.open(base).path if base is not None else default_base(own.get("env"))
        resolved = resolve_llm_config(
            root,
            env=own.get("env"),
            env_file=own.get("env_file"),
            config=own.get("llm"),
            **llm_args,
        )
    model = own.get("model_client")
    if model is None and resolved.config.effective_provider != "none":
        from .providers import make_model

        model = make_model(resolved.config)
    return Agent(
        resolved, model=model, base=base, executor=own.get("executor"), session=own.get("session")
    )


def execute_task(task: str, **config: Any) -> TaskResult:
    """One task with a fresh agent (see :func:`create_agent` for ``config``)."""
    verbose = bool(config.pop("verbose", False))
    with create_agent(**config) as agent:
        return agent.execute_task(task, verbose=verbose)


async def aexecute_task(task: str, **config: Any) -> TaskResult:
    """Async twin of :func:`execute_task`, for code already inside an event loop."""
    verbose = bool(config.pop("verbose", False))
    async with create_agent(**config) as agent:
        return await agent.aexecute_task(task, verbose=verbose)
