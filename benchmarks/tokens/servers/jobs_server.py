"""Jobs MCP server: start a long report job, poll its status, fetch its result.

A job is done after ``--polls N`` status calls (counted per job), so the benchmark's loop has
a fixed, known length and needs no wall-clock sleeps. Every tool declares its result's shape
(an output schema). Run: ``python jobs_server.py [--polls N]``.
"""

from __future__ import annotations

import argparse
from typing import Literal

from benchdata import job_report
from mcp.server import MCPServer
from typing_extensions import TypedDict

Status = Literal["queued", "running", "done"]


class Job(TypedDict):
    job_id: str
    status: Status
    report: str
    period: str


class JobStatus(TypedDict):
    job_id: str
    status: Status
    progress: int


class ReportRow(TypedDict):
    week: str
    region: str
    orders: int
    revenue: float


class JobResult(TypedDict):
    job_id: str
    report: str
    rows: list[ReportRow]
    total_revenue: float


def build(polls: int) -> MCPServer:
    server = MCPServer("jobs", instructions="Runs long reporting jobs in the background.")
    jobs: dict[str, int] = {}

    @server.tool()
    def start_job(report: str, period: str = "2026-Q3") -> Job:
        """Start a background reporting job (e.g. report='weekly_revenue'); returns its job_id."""
        job_id = f"job-{len(jobs) + 1:04d}"
        jobs[job_id] = 0
        return Job(job_id=job_id, status="queued", report=report, period=period)

    @server.tool()
    def get_job_status(job_id: str) -> JobStatus:
        """Get the status of a job: queued, running or done, with progress in percent."""
        if job_id not in jobs:
            raise ValueError(f"no job {job_id!r}")
        jobs[job_id] += 1
        seen = jobs[job_id]
        if seen >= polls:
            return JobStatus(job_id=job_id, status="done", progress=100)
        return JobStatus(job_id=job_id, status="running", progress=100 * seen // polls)

    @server.tool()
    def get_job_result(job_id: str) -> JobResult:
        """Get the result of a finished job."""
        if jobs.get(job_id, 0) < polls:
            raise ValueError(f"job {job_id!r} is not done")
        return JobResult(**job_report(job_id))

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--polls", type=int, default=8)
    build(parser.parse_args().polls).run("stdio")
