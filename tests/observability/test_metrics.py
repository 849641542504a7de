"""Metrics of runs and tool calls counted by the observe layers around a real session."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anyio
import pytest

from codemode import Session, SubprocessExecutor
from codemode.chain import NextRun, RunEvent
from codemode.errors import ConfigError, ToolError
from codemode.observability import Metrics, ObservabilityConfig
from codemode.observability.tally import FOLD_AT
from codemode.result import ExecutionResult
from codemode.tools import ToolCall, ToolRegistry
from codemode.tools.registry import NextCall

from .scrape import value

pytestmark = pytest.mark.anyio


def rows(n: int) -> list[dict[str, Any]]:
    """n customer rows."""
    return [{"id": i, "name": f"customer {i}", "notes": "x" * 40} for i in range(n)]


def echo(text: str) -> str:
    """The text back."""
    return text


def fail() -> None:
    """Always fails."""
    raise RuntimeError("down")


class Denied(ToolError):
    """A refusal as guard's layers raise it: a ``ToolDenied`` with a reason."""

    def __init__(self, reason: str, budget: str = "") -> None:
        super().__init__("refused", server="crm", tool="rows")
        self.reason = reason
        self.budget = budget


Denied.__name__ = "ToolDenied"


def calls(text: str, tool: str, outcome: str, server: str = "crm") -> float:
    return value(text, "codemode_tool_calls_total", server=server, tool=tool, outcome=outcome)


def registry(metrics: Metrics) -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(rows, server="crm")
    reg.register(echo, server="crm")
    reg.register(fail, server="crm")
    reg.use(metrics.tool_layer, "observe")
    return reg


async def session(metrics: Metrics, reg: ToolRegistry) -> Session:
    s = Session(SubprocessExecutor(), tools=reg)
    s.use(metrics.run_hook, "observe")
    await s.start()
    return s


async def test_a_known_sequence_of_runs_and_calls_gives_exact_counts() -> None:
    m = Metrics(process=False)
    s = await session(m, registry(m))
    try:
        ok = await s.run("data = tools.crm.rows(n=50)\nlen(data)")
        await s.run("tools.crm.echo(text='hi')\n1 / 0")
        await s.run("try:\n    tools.crm.fail()\nexcept Exception:\n    pass")
        await s.run("try:\n    tools.crm.rows(n='many')\nexcept Exception:\n    pass")
    finally:
        await s.close()
    text = m.exposition().decode()
    assert ok.value == 50
    assert value(text, "codemode_runs_total", outcome="ok") == 3
    assert value(text, "codemode_runs_total", outcome="error") == 1
    assert value(text, "codemode_run_errors_total", error_type="ZeroDivisionError") == 1
    assert value(text, "codemode_run_duration_seconds_count") == 4
    assert value(text, "codemode_run_duration_seconds_bucket", le="+Inf") == 4
    assert calls(text, "rows", "ok") == 1
    assert calls(text, "echo", "ok") == 1
    assert calls(text, "fail", "error") == 1
    assert calls(text, "rows", "bad_arguments") == 1
    hist = "codemode_tool_call_duration_seconds_count"
    assert value(text, hist, server="crm", tool="rows") == 2
    assert value(text, "codemode_runs_in_progress") == 0


async def test_a_scrape_during_a_run_shows_it_in_progress() -> None:
    """A run's start is noted without a lock (``Tally.started``); a scrape counts it."""
    m = Metrics(process=False)
    reg = registry(m)

    def in_progress() -> float:
        """Runs in progress, as a scrape now shows them."""
        return value(m.exposition().decode(), "codemode_runs_in_progress")

    reg.register(in_progress, server="crm")
    s = await session(m, reg)
    try:
        during = await s.run("tools.crm.in_progress()")
    finally:
        await s.close()
    assert during.value == 1
    text = m.exposition().decode()
    assert value(text, "codemode_runs_in_progress") == 0
    assert value(text, "codemode_runs_total", outcome="ok") == 1


def test_runs_noted_across_folds_are_counted_once_with_their_tool_bytes() -> None:
    """Starts, calls and ends are noted without a lock and counted in batches (every
    ``FOLD_AT`` notes, and at a scrape): each run once, its bytes matched to it."""
    m = Metrics(process=False)
    series = m._tool_series("crm", "rows")
    runs = FOLD_AT  # three notes a run: several folds on the way
    for i in range(runs):
        m.tally.started(f"r{i}")
        m.tally.note_call(series, 0.001, 10, 100, f"r{i}")
        m._end_run("ok", 0.01, f"r{i}", ExecutionResult(value="x" * 8, has_value=True))
    m.tally.started("live")  # in progress at the scrape
    text = m.exposition().decode()
    assert value(text, "codemode_runs_total", outcome="ok") == runs
    assert value(text, "codemode_run_duration_seconds_count") == runs
    assert value(text, "codemode_runs_in_progress") == 1
    assert value(text, "codemode_context_tool_bytes_total") == 100 * runs
    assert (
        value(text, "codemode_context_model_bytes_total") == 8 * runs
    )  # a string value's own bytes
    assert value(text, "codemode_tool_calls_total", server="crm", tool="rows", outcome="ok") == runs
    assert m.tally.run_bytes == {"live": 0}  # ended runs leave nothing behind


async def test_bytes_from_tools_and_to_the_model_give_the_context_ratio() -> None:
    m = Metrics(process=False)
    s = await session(m, registry(m))
    try:
        await s.run("data = tools.crm.rows(n=200)\nprint(len(data))")
        await s.run("print('no tools here' * 100)")  # no tool bytes: not in the ratio
    finally:
        await s.close()
    text = m.exposition().decode()
    received = value(text, "codemode_tool_call_received_bytes_total", server="crm", tool="rows")
    sent = value(text, "codemode_tool_call_sent_bytes_total", server="crm", tool="rows")
    assert received > 200 * 60  # 200 rows of ~70 bytes of JSON
    assert sent == len(b'{"n": 200}')
    assert value(text, "codemode_context_tool_bytes_total") == received
    assert value(text, "codemode_context_model_bytes_total") == len("200\n")
    ratio = value(text, "codemode_context_efficiency_ratio")
    assert ratio == pytest.approx(1 - 4 / received)
    total_out = len("200\n") + len("no tools here" * 100 + "\n")
    assert value(text, "codemode_run_output_bytes_total") == total_out
    assert value(text, "codemode_run_output_tokens_estimated_total") == total_out / 4


async def test_tool_labels_are_capped_and_the_rest_count_as_other() -> None:
    m = Metrics(process=False, max_tool_labels=1)
    reg = registry(m)
    await reg.call("crm", "echo", {"text": "a"})
    await reg.call("crm", "rows", {"n": 1})
    await reg.call("crm", "echo", {"text": "b"})
    text = m.exposition().decode()
    assert calls(text, "echo", "ok") == 2
    assert calls(text, "rows", "ok") == 0
    assert calls(text, "_other", "ok", server="_other") == 1


async def test_error_types_defined_by_agents_code_count_as_other() -> None:
    m = Metrics(process=False)
    s = await session(m, registry(m))
    try:
        for i in range(3):
            await s.run(f"class Mine{i}(Exception): pass\nraise Mine{i}()")
    finally:
        await s.close()
    text = m.exposition().decode()
    assert value(text, "codemode_run_errors_total", error_type="_other") == 3
    assert "Mine0" not in text


async def test_refusals_inside_the_chain_count_as_denials_and_budget_hits() -> None:
    m = Metrics(process=False)
    reg = registry(m)
    refusals = iter([Denied("policy"), Denied("budget", "run.tool_calls"), Denied("weird")])

    async def refuse(call: ToolCall, call_next: NextCall) -> Any:
        raise next(refusals)

    reg.use(refuse, "policy")
    for _ in range(3):
        with pytest.raises(ToolError):
            await reg.call("crm", "echo", {"text": "x"})
    text = m.exposition().decode()
    assert value(text, "codemode_tool_denials_total", reason="policy") == 1
    assert value(text, "codemode_tool_denials_total", reason="budget") == 1
    assert value(text, "codemode_tool_denials_total", reason="_other") == 1
    assert value(text, "codemode_budget_hits_total", budget="run.tool_calls") == 1
    assert calls(text, "echo", "denied") == 3


async def test_a_run_refused_by_an_inner_hook_counts_as_refused() -> None:
    m = Metrics(process=False)

    async def refuse(event: RunEvent, call_next: NextRun) -> ExecutionResult:
        raise ConfigError("no runs today")

    s = Session(SubprocessExecutor())
    s.use(m.run_hook, "observe")
    s.use(refuse, "checks")
    try:
        with pytest.raises(ConfigError):
            await s.run("1")
    finally:
        await s.close()
    text = m.exposition().decode()
    assert value(text, "codemode_runs_total", outcome="refused") == 1
    assert value(text, "codemode_run_errors_total", error_type="ConfigError") == 1
    assert value(text, "codemode_runs_in_progress") == 0


def test_a_token_auth_without_a_token_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="CODEMODE_OBSERVABILITY_METRICS_TOKEN"):
        ObservabilityConfig(metrics_auth="token")


async def test_worker_cpu_time_and_peak_memory_are_observed_per_run() -> None:
    m = Metrics(process=False)
    s = await session(m, registry(m))
    try:
        busy = await s.run(
            "n = 0\nfor i in range(3_000_000):\n    n += i\nblob = bytearray(64 << 20)"
        )
        idle = await s.run("import time\ntime.sleep(0.3)")
    finally:
        await s.close()
    text = m.exposition().decode()
    assert busy.cpu_seconds is not None and busy.cpu_seconds > 0.05
    assert idle.cpu_seconds is not None and idle.cpu_seconds < 0.2  # sleeping costs no CPU
    assert busy.peak_memory_bytes is not None and busy.peak_memory_bytes > 64 << 20
    assert value(text, "codemode_run_cpu_seconds_count") == 2
    assert value(text, "codemode_run_cpu_seconds_sum") == pytest.approx(
        busy.cpu_seconds + idle.cpu_seconds
    )
    assert value(text, "codemode_worker_peak_memory_bytes_bucket", le=str(float(64 << 20))) == 0
    assert value(text, "codemode_worker_peak_memory_bytes_count") == 2


async def test_the_warm_pool_is_a_gauge_read_at_each_scrape() -> None:
    m = Metrics(process=False)
    ex = SubprocessExecutor(pool_size=2)
    s = Session(ex)
    try:
        await s.start()
        for _ in range(200):  # the pool refills in the background: wait, bounded
            if value(m.exposition().decode(), "codemode_pool_ready_workers") >= 2:
                break
            await anyio.sleep(0.05)
        text = m.exposition().decode()
    finally:
        await s.close()
    assert value(text, "codemode_pool_ready_workers") >= 2
    assert value(text, "codemode_pool_target_workers") >= 2


def test_signals_from_privacy_and_approvals_are_counted_with_bounded_labels() -> None:
    from codemode.observability import default_metrics, signals

    before = default_metrics().exposition().decode()
    signals.pii_tokenized("EMAIL", 3)
    signals.pii_tokenized_counts({"EMAIL": 2, "PHONE": 4, "IBAN": 0})
    signals.approval("granted")
    signals.approval("made up by a caller")
    after = default_metrics().exposition().decode()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("codemode_pii_tokenized_total", entity="EMAIL") == 5
    assert delta("codemode_pii_tokenized_total", entity="PHONE") == 4
    assert delta("codemode_approvals_total", decision="granted") == 1
    assert delta("codemode_approvals_total", decision="_other") == 1


async def test_a_tool_name_with_control_characters_cannot_redraw_the_stats_table() -> None:
    from codemode.observability.summary import samples_of_text, summarize, table

    m = Metrics(process=False)
    reg = ToolRegistry()
    reg.register(echo, server="crm", name="echo\x1b[2K\x1b[1A\u202e")  # an upstream's name
    reg.use(m.tool_layer, "observe")
    await reg.call("crm", "echo\x1b[2K\x1b[1A\u202e", {"text": "a"})
    shown = table(summarize(samples_of_text(m.exposition().decode())))
    assert "echo\\u001b[2K" in shown
    assert not set("\x1b\u202e") & set(shown)


def test_calls_from_many_threads_are_all_counted_while_scrapes_run() -> None:
    """Returned calls are noted without a lock and counted in batches (``Tally.fold``):
    none is lost or counted twice when threads call and scrape at once."""
    metrics = Metrics(process=False)
    reg = registry(metrics)
    per_thread, threads = 300, 4

    def caller() -> None:
        async def calls_in_a_loop() -> None:
            for i in range(per_thread):
                await reg.call("crm", "echo", {"text": f"{i:03d}"})

        asyncio.run(calls_in_a_loop())

    workers = [threading.Thread(target=caller) for _ in range(threads)]
    for w in workers:
        w.start()
    while any(w.is_alive() for w in workers):
        metrics.exposition()  # folds what is noted so far, concurrently with the calls
    for w in workers:
        w.join()
    text = metrics.exposition().decode()
    n = per_thread * threads
    assert calls(text, "echo", "ok") == n
    pair = {"server": "crm", "tool": "echo"}
    assert value(text, "codemode_tool_call_duration_seconds_count", **pair) == n
    assert value(text, "codemode_tool_call_sent_bytes_total", **pair) == n * len('{"text": "000"}')
    assert value(text, "codemode_tool_call_received_bytes_total", **pair) == n * len('"000"')
