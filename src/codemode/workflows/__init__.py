"""Workflows: steps in YAML or JSON, run durably in one session (docs/workflows.md).

::

    from codemode.workflows import run_workflow
    result = run_workflow("digest.yaml", inputs={"folder": "notes"}, base="~/.codemode")
    result.status, result.result, result.run_id

Surfaces: ``codemode workflow run|validate|resume|list|schema``, ``python -m
codemode.workflows.executor --workflow file.yaml``, the MCP tool ``run_workflow``, and
these functions. Each run is journaled (``journal``); ``resume_workflow(run_id)``
continues a run that stopped, never re-running a finished step.
"""

from __future__ import annotations

from .ask import Answer, Asker, scripted_asker, terminal_asker
from .engine import Checkpointer, StepContext, StepEvent
from .errors import NeedsDecision, StepFailed, Stopped, WorkflowError
from .model import Form, Step, Workflow
from .runner import (
    RunResult,
    aresume_workflow,
    arun_workflow,
    list_runs,
    load_workflow,
    resume_workflow,
    run_workflow,
    schema,
)

__all__ = [
    "Answer",
    "Asker",
    "Checkpointer",
    "Form",
    "NeedsDecision",
    "RunResult",
    "Step",
    "StepContext",
    "StepEvent",
    "StepFailed",
    "Stopped",
    "Workflow",
    "WorkflowError",
    "aresume_workflow",
    "arun_workflow",
    "list_runs",
    "load_workflow",
    "resume_workflow",
    "run_workflow",
    "schema",
    "scripted_asker",
    "terminal_asker",
]
