"""Plain-number tallies of the hot path, shown to Prometheus by a collector at scrape time.

Why: a ``prometheus_client`` counter increment is five Python calls and a lock of its own,
a histogram observation seven; a run with five tool calls made some 330 such calls on the
event loop's thread. In a real run, between MCP messages and worker frames, that code runs
with cold caches and cost about 100 µs of the loop's CPU per run (three times what the
same calls cost in a tight loop). Here a tool call or a run updates a few ints and lists
under one lock, and the collector turns them into the same ``codemode_*`` families when
Prometheus (or a test) scrapes.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from .sizes import args_size, canonical, size_of

_go_float: Callable[[float], str] = floatToGoString  # untyped upstream


class Hist:
    """Bucket counts (the last is +Inf) and the sum of what was observed."""

    __slots__ = ("bounds", "counts", "labels", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.labels = [_go_float(b) for b in (*self.bounds, float("inf"))]
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        """Caller holds the tally's lock. ``bisect_left`` finds the first bound >= value,
        Prometheus's ``le`` rule."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def family_sample(self) -> tuple[list[tuple[str, float]], float]:
        acc = 0.0
        buckets = []
        for label, n in zip(self.labels, self.counts, strict=True):
            acc += n
            buckets.append((label, acc))
        return buckets, self.total


class ToolSeries:
    """The tallies of one server/tool pair."""

    __slots__ = ("calls", "received", "seconds", "sent", "server", "tool")

    def __init__(self, server: str, tool: str, bounds: Sequence[float]) -> None:
        self.server = server
        self.tool = tool
        self.seconds = Hist(bounds)
        self.sent = 0
        self.received = 0
        self.calls: dict[str, int] = {}  # outcome -> count


FOLD_AT = 1024
"""Notes in ``Tally.calls`` before the one noting them folds them in. A traced run notes
two (its calls come with its end), so its calls' arguments are usually encoded as JSON by
the tracing emitter (every 0.2 s, ``spans.texts``) before a fold measures them."""

OpFields = tuple[Any, ...]
"""``spans.OpFields`` or ``spans.CallNote`` (spans imports metrics, which imports this)."""

CallNote = tuple[Any, ...]
"""What ``Tally.calls`` holds, told apart by the first item:

- a tool call that returned: its ``ToolSeries``, seconds, bytes sent (or the arguments,
  measured by the fold: encoding them as JSON is most of what counting a call costs, and a
  batch of them runs warm, off the call's path) and received, run id;
- a run that started (``Tally.started``): None, then its run id;
- a run that ended (``Tally.ended``): its outcome, seconds, the bytes it returned to the
  model (None when it raised instead), its CPU seconds and peak memory (or None), run id,
  and (a traced run, ``observe.Observe``) the fields of its calls noted for its spans:
  its calls that returned are counted from those, one note a run instead of one a call.
"""


class Tally:
    """The hot-path numbers of one ``Metrics``; ``lock`` guards every field but ``calls``.

    Why ``calls``: counting a call under the lock (a bucket, a sum, four counters, the
    run's bytes) cost ~1 µs of the event loop's CPU per call in a real chain, as much as
    everything else the metrics layer does. A call that returns appends one tuple to
    ``calls`` instead (atomic, no lock), and ``fold`` counts what is there in one tight
    loop: before a scrape reads the tallies and every ``FOLD_AT`` notes. A run's start and
    end are noted there too, in order with its calls, so a run takes no lock either: folded
    at each run's end, its few notes cost ~20 µs of the loop's CPU in a real chain (cold
    code and data between worker frames), several times what a batch costs per note. What
    a scrape shows is the same."""

    def __init__(
        self,
        run_buckets: Sequence[float],
        memory_buckets: Sequence[float],
        series_of: Callable[[str, str], ToolSeries],
    ) -> None:
        self.lock = threading.Lock()
        self.series_of = series_of
        """The series of a server/tool pair, made when new (called with ``lock`` held)."""
        self.calls: deque[CallNote] = deque()
        self.run_bytes: dict[str, int] = {}
        """Run id -> bytes its tool calls returned so far (runs in progress)."""
        self.series: dict[tuple[str, str], ToolSeries] = {}
        self.runs: dict[str, int] = {}  # outcome -> count
        self.active = 0
        self.run_seconds = Hist(run_buckets)
        self.run_cpu = Hist(run_buckets)
        self.run_memory = Hist(memory_buckets)
        self.output_bytes = 0
        self.context_tool = 0
        self.context_model = 0

    def fold(self) -> None:
        """Count what is noted in ``calls`` (caller holds ``lock``)."""
        calls, run_bytes = self.calls, self.run_bytes
        while calls:
            note = calls.popleft()
            head = note[0]
            if type(head) is ToolSeries:  # a call that returned, the common note
                _, seconds, sent, received, run_id = note
                if type(sent) is not int:  # the arguments themselves: measured here
                    sent = args_size(sent)
                hist = head.seconds
                hist.counts[bisect_left(hist.bounds, seconds)] += 1
                hist.total += seconds
                outcomes = head.calls
                outcomes["ok"] = outcomes.get("ok", 0) + 1
                head.sent += sent
                head.received += received
                if run_id is not None and run_id in run_bytes:
                    run_bytes[run_id] += received
            elif head is None:  # a run started: in progress, its calls' bytes counted
                run_id = note[1]
                self.active += 1
                if run_id is not None:
                    run_bytes[run_id] = 0
            else:
                self._end(*note)

    def _end(
        self,
        outcome: str,
        seconds: float,
        out: int | None,
        cpu: float | None,
        peak: int | None,
        run_id: str | None,
        ops: list[OpFields] | None = None,
    ) -> None:
        self.active -= 1
        self.run_seconds.observe(seconds)
        self.runs[outcome] = self.runs.get(outcome, 0) + 1
        tool_bytes = 0 if run_id is None else self.run_bytes.pop(run_id, 0)
        if ops:
            tool_bytes += self._ops(ops)
        if out is None:  # raised: no result
            return
        if cpu is not None:
            self.run_cpu.observe(cpu)
        if peak is not None:
            self.run_memory.observe(peak)
        self.output_bytes += out
        if tool_bytes > 0:
            self.context_tool += tool_bytes
            self.context_model += out

    def _ops(self, ops: list[OpFields]) -> int:
        """Count the tool calls a traced run noted for its spans (``spans.OpFields``) that
        returned: such a run's calls note nothing else. Returns the bytes they returned."""
        series_of, total = self.series_of, 0
        for i, fields in enumerate(ops):
            if len(fields) == 5:  # spans.CallNote: a call that returned
                call, args, start, end, received = fields
                series = series_of(call.server, call.tool)
                if type(args) is not str:  # not yet encoded by the tracing emitter
                    args = canonical(args)
                    ops[i] = (call, args, start, end, received)  # nor will it be, then
            else:
                server, tool, method, _, start, args, _, received, end, error = fields
                if method is not None or error is not None:  # memory ops; failures: counted
                    continue
                if type(args) is not str:  # not yet encoded by the tracing emitter
                    args = canonical(args)
                    ops[i] = (*fields[:5], args, *fields[6:])  # nor will it be, then
                series = series_of(server, tool)
            seconds = (end - start) * 1e-9
            hist = series.seconds
            hist.counts[bisect_left(hist.bounds, seconds)] += 1
            hist.total += seconds
            outcomes = series.calls
            outcomes["ok"] = outcomes.get("ok", 0) + 1
            series.sent += size_of(args)
            series.received += received
            total += received
        return total

    def started(self, run_id: str | None) -> None:
        """A run started (any thread, no lock)."""
        self.calls.append((None, run_id))

    def ended(
        self,
        outcome: str,
        seconds: float,
        out: int | None,
        cpu: float | None,
        peak: int | None,
        run_id: str | None,
    ) -> None:
        """A run ended (any thread, no lock); ``out`` None: it raised."""
        calls = self.calls
        calls.append((outcome, seconds, out, cpu, peak, run_id))
        if len(calls) >= FOLD_AT:
            with self.lock:
                self.fold()

    def note_call(
        self,
        series: ToolSeries,
        seconds: float,
        sent: int | dict[str, Any],
        received: int,
        run_id: str | None,
    ) -> None:
        """A call that returned (any thread, no lock); ``sent`` may be its arguments."""
        calls = self.calls
        calls.append((series, seconds, sent, received, run_id))
        if len(calls) >= FOLD_AT:
            with self.lock:
                self.fold()


class TallyCollector:
    """Shows a ``Tally`` as the families ``Metrics`` documents (same names, help and labels
    as the ``prometheus_client`` objects they replace)."""

    def __init__(self, tally: Tally, bytes_per_token: int) -> None:
        self.tally = tally
        self.bytes_per_token = bytes_per_token

    def describe(self) -> list[Metric]:
        return list(self._families(empty=True))

    def collect(self) -> Iterator[Metric]:
        with self.tally.lock:  # a consistent snapshot; building text happens outside
            self.tally.fold()
            families = list(self._families(empty=False))
        return iter(families)

    def _families(self, *, empty: bool) -> Iterator[Metric]:
        t = self.tally
        runs = CounterMetricFamily("codemode_runs", "Runs by outcome.", labels=["outcome"])
        for outcome, n in [] if empty else t.runs.items():
            runs.add_metric([outcome], n)
        yield runs
        for name, help_, hist in (
            (
                "codemode_run_duration_seconds",
                "Wall time of a run, its hooks included.",
                t.run_seconds,
            ),
            (
                "codemode_run_cpu_seconds",
                "CPU time the worker spent on a run (all its threads; rusage).",
                t.run_cpu,
            ),
            (
                "codemode_worker_peak_memory_bytes",
                "The worker's peak resident memory at the end of each run (rusage).",
                t.run_memory,
            ),
        ):
            family = HistogramMetricFamily(name, help_)
            if not empty:
                family.add_metric([], *hist.family_sample())
            yield family
        yield GaugeMetricFamily("codemode_runs_in_progress", "Runs now running.", t.active)
        yield CounterMetricFamily(
            "codemode_run_output_bytes",
            "Bytes runs returned to the model (stdout, stderr, value or error text).",
            t.output_bytes,
        )
        yield CounterMetricFamily(
            "codemode_run_output_tokens_estimated",
            f"Estimated tokens runs returned to the model (bytes / {self.bytes_per_token}).",
            t.output_bytes / self.bytes_per_token,
        )
        yield CounterMetricFamily(
            "codemode_context_tool_bytes",
            "Bytes tools returned into runs that called tools.",
            t.context_tool,
        )
        yield CounterMetricFamily(
            "codemode_context_model_bytes",
            "Bytes those same runs returned to the model.",
            t.context_model,
        )
        yield from self._tool_families(() if empty else t.series.values())

    @staticmethod
    def _tool_families(series: Any) -> Iterator[Metric]:
        pair = ["server", "tool"]
        calls = CounterMetricFamily(
            "codemode_tool_calls",
            "Tool calls by server, tool and outcome.",
            labels=[*pair, "outcome"],
        )
        seconds = HistogramMetricFamily(
            "codemode_tool_call_duration_seconds",
            "Wall time of a tool call, the layers inside observe included.",
            labels=pair,
        )
        sent = CounterMetricFamily(
            "codemode_tool_call_sent_bytes",
            "Bytes of arguments sent to tools (JSON, UTF-8).",
            labels=pair,
        )
        received = CounterMetricFamily(
            "codemode_tool_call_received_bytes",
            "Bytes of results tools returned into the sandbox (JSON, UTF-8).",
            labels=pair,
        )
        for s in series:
            labels = [s.server, s.tool]
            for outcome, n in s.calls.items():
                calls.add_metric([*labels, outcome], n)
            if s.calls:
                seconds.add_metric(labels, *s.seconds.family_sample())
                sent.add_metric(labels, s.sent)
                received.add_metric(labels, s.received)
        yield from (calls, seconds, sent, received)


__all__ = ["Hist", "Tally", "TallyCollector", "ToolSeries"]
