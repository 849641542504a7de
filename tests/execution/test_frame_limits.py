"""Honest code never trips the host's frame caps: it gets a clear error instead, and
keeps its session."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from codemode import Session, SubprocessExecutor

pytestmark = pytest.mark.anyio


async def _echo(params: dict[str, Any]) -> int:
    return len(params)


async def _mirror(params: dict[str, Any]) -> Any:
    return params["data"]


def _refusal(params: str) -> str:
    """Code that calls the host with ``params`` and evaluates to why it was refused."""
    return (
        "from codemode_worker import bridge\n"
        "try:\n"
        f"    bridge.call('test.echo', {params})\n"
        "except Exception as exc:\n"
        "    refused = str(exc)\n"
        "refused"
    )


async def test_a_call_over_the_frame_cap_is_refused_in_the_code_and_the_state_survives() -> None:
    async with Session(SubprocessExecutor(max_frame_mb=1)) as s:
        s.host.register("test.echo", _echo)
        await s.run("kept = 'state'")
        r = await s.run(_refusal("{'data': b'x' * (2 << 20)}"))
        assert not r.state_lost and "at most 1 MB" in str(r.value), r.to_text()
        assert (await s.run("bridge.call('test.echo', {'small': 1}), kept")).value == [1, "state"]


async def test_a_call_with_millions_of_values_is_refused_in_the_code_with_the_fix() -> None:
    async with Session(SubprocessExecutor()) as s:
        s.host.register("test.echo", _echo)
        await s.run("kept = 'state'")
        r = await s.run(_refusal("{'rows': [[]] * 1_100_000}"))
        assert not r.state_lost and "JSON values" in str(r.value), r.to_text()
        assert "bytes or str" in str(r.value)
        assert (await s.run("kept")).value == "state"


async def test_output_that_escapes_past_the_result_cap_is_trimmed_not_fatal() -> None:
    # 2 million control characters per stream: each is six bytes once JSON-escaped
    async with Session(SubprocessExecutor(max_output=2_000_000)) as s:
        code = (
            "import sys\nprint('\\x01' * 2_000_000)\nprint('\\x02' * 2_000_000, file=sys.stderr)\n7"
        )
        r = await s.run(code)
        assert r.error is None and not r.state_lost, r.to_text()[:500]
        assert r.stdout_truncated and r.stderr_truncated and r.value == 7
        assert "characters in all" in r.stdout


def _peak_growth_since_reset() -> tuple[int, Any]:
    """Reset this process's peak RSS; return its RSS and a function giving the growth."""

    def kb(field: str) -> int:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise AssertionError(field)

    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    base = kb("VmRSS")
    return base, lambda: (kb("VmHWM") - base) << 10


async def test_large_frames_from_many_workers_at_once_stay_within_the_process_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from codemode.execution import frames

    monkeypatch.setattr(frames.BUDGET, "capacity", 64 << 20)
    sessions = [Session(SubprocessExecutor(pool_size=0)) for _ in range(6)]
    await asyncio.gather(*(s.start() for s in sessions))
    try:
        for s in sessions:
            s.host.register("test.echo", _echo)
            await s.run("from codemode_worker import bridge\ndata = 'x' * (64 << 20)")
        _, growth = _peak_growth_since_reset()
        results = await asyncio.gather(
            *(s.run("bridge.call('test.echo', {'data': data})", timeout=120) for s in sessions)
        )
        assert [r.value for r in results] == [1] * 6, [r.to_text()[:300] for r in results]
        assert growth() < 350 << 20, f"the host grew by {growth() >> 20} MB"
    finally:
        await asyncio.gather(*(s.close() for s in sessions))


async def test_large_text_and_bytes_cross_as_attachments_in_both_directions() -> None:
    async with Session(SubprocessExecutor()) as s:
        s.host.register("test.mirror", _mirror)
        code = (
            "from codemode_worker import bridge\n"
            "text = 'é' * (20 << 20)\n"  # 40 MB of UTF-8: over the JSON cap of a call
            "blob = bytes(range(256)) * (1 << 17)\n"
            "back = bridge.call('test.mirror', {'data': [text, blob, 'small', b'tiny']})\n"
            "back == [text, blob, 'small', b'tiny']"
        )
        r = await s.run(code, timeout=120)
        assert r.value is True, r.to_text()
