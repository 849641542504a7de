"""The ``observability`` config section: metrics, who may read them, and traces."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class ObservabilityConfig(BaseModel):
    """Metrics are on by default: they cost little and carry no session ids or values."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metrics: bool = Field(
        default=True, description="Count runs and tool calls (codemode_* Prometheus metrics)."
    )
    metrics_auth: Literal["server", "token", "none"] = Field(
        default="server",
        description=(
            "Who may read /metrics on `serve --transport http`: server (the server's bearer "
            "token), token (metrics_token only), none (anyone who can reach the port)."
        ),
    )
    metrics_token: SecretStr | None = Field(
        default=None, description="The bearer token for /metrics when metrics_auth is token."
    )
    max_tool_labels: int = Field(
        default=500,
        ge=1,
        le=100_000,
        description="Distinct server/tool label pairs kept; later ones count as _other.",
    )

    tracing: Literal["off", "console", "otlp"] = Field(
        default="off",
        description=(
            "OpenTelemetry spans of runs and tool calls (needs codemode[otel]): console "
            "(stderr) or otlp (HTTP; endpoint from otlp_endpoint or OTEL_EXPORTER_OTLP_*)."
        ),
    )
    otlp_endpoint: str | None = Field(
        default=None, description="OTLP/HTTP traces endpoint, e.g. http://collector:4318/v1/traces."
    )
    trace_sample_ratio: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description=(
            "Share of the runs that start a trace which are traced (by trace id); a run "
            "joining a client's trace (traceparent) follows that trace's sampled flag. "
            "Unsampled runs cost the tracing layers one lookup per call."
        ),
    )
    trace_propagation: bool = Field(
        default=True,
        description=(
            "Pass a run's trace on to upstream MCP servers (traceparent in each tool "
            "request's _meta), so their spans join it. Off saves the per-call cost of "
            "writing and reading it; codemode's own spans are unchanged."
        ),
    )
    trace_export_process: bool = Field(
        default=True,
        description=(
            "Build and export spans in a child process: the server process only notes ids, "
            "times and sizes, and the OpenTelemetry SDK's CPU (~150 µs per run with 5 tool "
            "calls) does not compete with its event loop for the GIL. Off: in the server."
        ),
    )
    service_name: str = Field(
        default="codemode", min_length=1, description="service.name of the spans."
    )

    @model_validator(mode="after")
    def _token_given(self) -> ObservabilityConfig:
        if self.metrics_auth == "token" and not (
            self.metrics_token and self.metrics_token.get_secret_value()
        ):
            raise ValueError(
                "metrics_auth is 'token' but metrics_token is empty: set "
                "CODEMODE_OBSERVABILITY_METRICS_TOKEN (or choose metrics_auth 'server')"
            )
        return self


__all__ = ["ObservabilityConfig"]
