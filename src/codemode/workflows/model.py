"""The workflow file format (YAML or JSON), as pydantic models; the JSON Schema published
as ``workflow.schema.json`` is generated from them (``codemode workflow schema``).

::

    name: notes-digest
    inputs:
      folder: {type: string, default: notes}
    steps:
      - id: files
        tool: fs.list_directory               # a tool of any server: MCP, YAML, plugin
        args: {path: "${inputs.folder}"}
        output: listing                       # later steps read it as `listing`
      - code: |                               # runs in the run's session (shared globals)
          names = [l[7:] for l in listing.splitlines() if l.startswith("[FILE]")]
          names
        output: names
      - if: "${len(names) == 0}"
        then: [{set: {summary: "nothing to read"}}]
        else:
          - foreach: "${names}"
            as: name
            concurrency: 4
            do:
              - tool: fs.read_text_file
                args: {path: "${inputs.folder + '/' + name}"}
                retry: {attempts: 3, backoff: 0.5}
                timeout: 10
            output: texts
      - ask: "Save the digest of ${len(names)} notes?"
        schema: {type: object, properties: {confirm: {type: boolean}}, required: [confirm]}
      - skill: save_digest
        args: {texts: "${texts}"}
    result: "${names}"

A step names its kind with one key: ``code``, ``tool``, ``skill``, ``task`` (the agent
runner), ``ask``, ``form``, ``if``, ``foreach``, ``set``, or a plugin's step type. The
common options: ``id`` (default ``step<N>``), ``output`` (bind the step's result to a
name), ``timeout`` (seconds), ``retry`` (attempts, backoff), ``idempotent`` (the author's
word that re-running the step is harmless) and, for tool steps, ``idempotency_key``
(``true`` for a key derived from the run and the step, or a template) passed to the tool
as the argument ``idempotency_arg``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .steps import BUILTIN_KINDS


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Retry(_Model):
    """Attempts with exponential backoff: ``backoff * factor**(n-1)`` seconds, capped."""

    attempts: int = Field(3, ge=1, le=50)
    backoff: float = Field(0.5, ge=0, le=3600)
    factor: float = Field(2.0, ge=1, le=10)
    max_backoff: float = Field(30.0, ge=0, le=3600)
    on: list[str] | None = Field(
        None, description="Error type names to retry (ToolError, ToolTimeout...); default all."
    )


class Input(_Model):
    type: Literal["string", "integer", "number", "boolean", "array", "object"] | None = None
    description: str = ""
    default: Any = None
    required: bool | None = None

    @property
    def is_required(self) -> bool:
        return self.required if self.required is not None else self.default is None


class FormField(_Model):
    """Where one field of a form gets its value (first that yields one wins)."""

    value: Any = Field(None, description="A value or ${expression} (earlier steps, inputs).")
    tool: str | None = Field(None, description="server.tool whose result fills the field.")
    args: dict[str, Any] = Field(default_factory=dict)
    pick: str | None = Field(
        None, description="Expression (bare or ${...}) over `result` choosing the value."
    )
    ask: bool = Field(True, description="Ask a person when nothing else filled it.")


class Form(_Model):
    """A form: its JSON Schema, where fields come from, and the tool that takes it."""

    schema_: dict[str, Any] = Field(alias="schema")
    fields: dict[str, FormField] = Field(default_factory=dict)
    submit: str = Field(description="server.tool that receives the filled form.")
    submit_args: dict[str, Any] = Field(
        default_factory=dict,
        description="More arguments of the submission; ${form} is the filled form (then its "
        "fields are not passed one by one).",
    )
    as_arg: str | None = Field(
        None, description="Pass the form as this one argument (default: its fields as arguments)."
    )
    message: str = "Please complete the form."


class Step(BaseModel):
    """One step (see the module doc); unknown keys are a plugin's step type."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    id: str | None = None
    description: str = ""
    output: str | None = None
    timeout: float | None = Field(None, gt=0)
    retry: Retry | int | None = None
    idempotent: bool | None = None
    idempotency_key: bool | str | None = None
    idempotency_arg: str = "idempotency_key"
    # kinds
    code: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    skill: str | None = None
    task: str | None = None
    ask: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    form: Form | None = None
    if_: str | bool | None = Field(None, alias="if")
    then: list[Step] | None = None
    else_: list[Step] | None = Field(None, alias="else")
    foreach: str | list[Any] | None = None
    as_: str = Field("item", alias="as")
    concurrency: int = Field(1, ge=1, le=64)
    do: list[Step] | None = None
    set: dict[str, Any] | None = None

    @field_validator("id", "output", "as_")
    @classmethod
    def _ident(cls, v: str | None) -> str | None:
        if v is not None and not v.isidentifier():
            raise ValueError(f"{v!r} must be an identifier (letters, digits, _)")
        return v

    @field_validator("tool")
    @classmethod
    def _tool(cls, v: str | None) -> str | None:
        if v is not None and "." not in v.strip("."):
            raise ValueError(f"{v!r}: name tools as server.tool")
        return v

    @property
    def kind(self) -> str:
        for key in BUILTIN_KINDS:
            attr = {"if": "if_"}.get(key, key)
            if getattr(self, attr) is not None:
                return key
        extra = list(self.model_extra or {})
        return extra[0] if extra else ""

    @property
    def plugin_args(self) -> Any:
        return (self.model_extra or {}).get(self.kind)

    @model_validator(mode="after")
    def _one_kind(self) -> Step:
        kinds = [k for k in BUILTIN_KINDS if getattr(self, {"if": "if_"}.get(k, k)) is not None]
        extra = list(self.model_extra or {})
        if len(kinds) + len(extra) != 1:
            named = ", ".join([*kinds, *extra]) or "none"
            raise ValueError(
                f"a step has exactly one kind ({', '.join(BUILTIN_KINDS)} or a plugin's "
                f"step type); this one has: {named}"
            )
        kind = kinds[0] if kinds else extra[0]
        if kind != "if" and (self.then is not None or self.else_ is not None):
            raise ValueError("then/else belong to an `if` step")
        if kind == "if" and self.then is None:
            raise ValueError("an `if` step needs `then`")
        if kind != "foreach" and self.do is not None:
            raise ValueError("do belongs to a `foreach` step")
        if kind == "foreach" and self.do is None:
            raise ValueError("a `foreach` step needs `do`")
        if self.args is not None and kind not in ("tool", "skill"):
            raise ValueError("args belong to `tool` and `skill` steps")
        if self.schema_ is not None and kind != "ask":
            raise ValueError("schema belongs to an `ask` step (a form has its own)")
        if self.idempotency_key is not None and kind != "tool":
            raise ValueError("idempotency_key belongs to `tool` steps")
        return self

    def children(self) -> list[tuple[str, list[Step]]]:
        out = []
        for label, steps in (("then", self.then), ("else", self.else_), ("do", self.do)):
            if steps is not None:
                out.append((label, steps))
        return out


class Workflow(_Model):
    """A workflow file."""

    name: str = Field("workflow", description="Shown in listings and progress.")
    description: str = ""
    inputs: dict[str, Input] = Field(default_factory=dict)
    steps: list[Step] = Field(min_length=1)
    result: Any = Field(None, description="What the run returns (default: the last output).")

    @model_validator(mode="after")
    def _ids(self) -> Workflow:
        _check_ids(self.steps, "steps")
        return self


def step_ids(steps: list[Step]) -> list[str]:
    """Each step's id: its own, else ``step<N>`` (1-based, by position)."""
    return [s.id or f"step{i + 1}" for i, s in enumerate(steps)]


def _check_ids(steps: list[Step], where: str) -> None:
    ids = step_ids(steps)
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"{where}: step ids used twice: {', '.join(twice)}")
    for step, sid in zip(steps, ids, strict=True):
        for label, children in step.children():
            _check_ids(children, f"{sid}.{label}")


Step.model_rebuild()

__all__ = ["Form", "FormField", "Input", "Retry", "Step", "Workflow", "step_ids"]
