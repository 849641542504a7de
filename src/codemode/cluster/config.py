"""The ``ray`` config section: where the cluster is and what each session's actor reserves."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RayConfig(BaseModel):
    """Read when ``executor`` is ``ray``. The defaults fit many small sessions per node."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str | None = Field(
        default=None,
        description="The Ray cluster to join (host:port of the head's GCS, or auto); "
        "unset starts a private local Ray for development.",
    )
    namespace: str = Field(
        default="codemode",
        min_length=1,
        description="Ray namespace of the session actors; the tenant is appended.",
    )
    num_cpus: float = Field(
        default=0.01,
        gt=0,
        le=64,
        description="CPUs each session's actor reserves (Ray's own default of 1 would fit "
        "one session per core).",
    )
    memory_mb: int = Field(
        default=0,
        ge=0,
        description="Memory each session's actor reserves for Ray's placement; 0: the "
        "worker's memory limit plus the actor's own ~150 MB.",
    )
    resources: dict[str, float] = Field(
        default_factory=dict,
        description="Custom Ray resources each actor needs, to keep sessions on the nodes "
        'that offer them (e.g. {"codemode": 0.01}).',
    )
    spread: bool = Field(
        default=True,
        description="Spread sessions over the nodes (Ray's SPREAD strategy); false packs "
        "them onto as few nodes as fit (Ray's default), which a fractional CPU per actor "
        "would make one node.",
    )
    worker: Literal["sandbox", "subprocess"] = Field(
        default="sandbox",
        description="The worker the actor starts on its node: sandbox (bubblewrap, seccomp, "
        "limits) or subprocess (no isolation: trusted code only).",
    )
    task_events: bool = Field(
        default=False,
        description="Ray's task events for the session actors' calls (the dashboard's task "
        "list, `ray list tasks`, `ray.timeline`). Off: no call is recorded and reported to "
        "the GCS (up to ~0.1 ms of a call, GCS traffic per call: docs/ray.md); on to debug.",
    )
    direct: bool = Field(
        default=True,
        description="Runs go over a direct TCP link from the host to the session's actor "
        "(authenticated with a secret only Ray's callers learn; falls back to Ray calls "
        "when it breaks): ~1 ms less per run than actor calls here (docs/ray.md). Nodes "
        "must accept TCP from the hosts on ephemeral ports; false: every run is Ray calls.",
    )
    connect_timeout: float = Field(
        default=15.0, gt=0, description="Seconds to reach the cluster at start."
    )
    start_timeout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a session's actor may take to be placed and start its worker.",
    )
    idle_timeout: float = Field(
        default=0,
        ge=0,
        description="Seconds without a run after which an actor ends itself and frees its "
        "node (the next run starts afresh); 0: only when the session closes.",
    )
