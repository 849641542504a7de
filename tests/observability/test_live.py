"""Live output: what a cell prints reaches the caller while it runs, before the result."""

from __future__ import annotations

import time
from typing import Any

import pytest

from codemode import ExecutionResult, InProcessExecutor, Session, SubprocessExecutor
from codemode.live import OutputChunk

pytestmark = pytest.mark.anyio

SLOW = (
    "import time, sys\n"
    "for i in range(3):\n"
    "    print(f'tick {i}', flush=True)\n"
    "    time.sleep(0.3)\n"
    "print('oops', file=sys.stderr)\n"
    "'done'"
)


@pytest.fixture(params=["subprocess", "inprocess"])
def executor(request: pytest.FixtureRequest) -> Any:
    return SubprocessExecutor() if request.param == "subprocess" else InProcessExecutor()


async def test_chunks_arrive_while_the_cell_runs_and_before_its_result(executor: Any) -> None:
    got: list[tuple[float, str, str]] = []
    async with Session(executor) as s:
        start = time.monotonic()
        result = await s.run(
            SLOW, on_output=lambda stream, text: got.append((time.monotonic(), stream, text))
        )
        ended = time.monotonic()
    assert result.value == "done"
    assert result.stdout == "tick 0\ntick 1\ntick 2\n"
    assert "".join(t for _, s, t in got if s == "stdout") == result.stdout
    assert "".join(t for _, s, t in got if s == "stderr") == "oops\n"
    first = next(at for at, _, text in got if "tick 0" in text)
    assert first - start < ended - start - 0.5  # the first tick came long before the end


async def test_an_async_listener_is_awaited_in_order() -> None:
    seen: list[str] = []

    async def listener(stream: str, text: str) -> None:
        seen.append(text)

    async with Session(SubprocessExecutor()) as s:
        await s.run("for i in range(200):\n    print(i)", on_output=listener)
    assert "".join(seen) == "".join(f"{i}\n" for i in range(200))


async def test_stream_yields_chunks_then_the_result() -> None:
    items: list[OutputChunk | ExecutionResult] = []
    async with Session(SubprocessExecutor()) as s:
        async for item in s.stream(SLOW):
            items.append(item)
        again = await s.run("1 + 1")  # the session is usable afterwards
    assert isinstance(items[-1], ExecutionResult) and items[-1].value == "done"
    chunks = [i for i in items[:-1] if isinstance(i, OutputChunk)]
    assert len(chunks) == len(items) - 1 >= 2
    assert "".join(c.text for c in chunks if c.stream == "stdout") == items[-1].stdout
    assert again.value == 2


async def test_streamed_output_stops_at_the_same_limit_as_the_result() -> None:
    got: list[str] = []
    async with Session(SubprocessExecutor(max_output=1000)) as s:
        result = await s.run("print('x' * 5000)", on_output=lambda _s, t: got.append(t))
    assert result.stdout_truncated
    assert "".join(got) == "x" * 1000


async def test_a_failing_listener_never_fails_the_run() -> None:
    def broken(stream: str, text: str) -> None:
        raise RuntimeError("listener bug")

    async with Session(SubprocessExecutor()) as s:
        result = await s.run("print('a')\nprint('b')\n7", on_output=broken)
    assert result.value == 7 and result.stdout == "a\nb\n"


async def test_runs_without_a_listener_are_unchanged() -> None:
    async with Session(SubprocessExecutor()) as s:
        first = await s.run("print('quiet')")
        second = await s.run("print('again')\n3")
    assert first.stdout == "quiet\n" and second.value == 3


async def test_code_calling_the_output_row_itself_cannot_pass_the_limit() -> None:
    got: list[str] = []
    code = (
        "from codemode_worker import bridge\n"
        "for _ in range(5):\n"
        "    bridge.call('output.write', {'chunks': [{'stream': 'stdout', 'text': 'y' * 800}]})"
    )
    async with Session(SubprocessExecutor(max_output=1000)) as s:
        await s.run(code, on_output=lambda _s, t: got.append(t))
    assert "".join(got) == "y" * 1000


async def test_a_print_loop_is_coalesced_into_at_most_one_chunk_per_50_ms() -> None:
    got: list[str] = []
    code = (
        "import time\n"
        "t = time.monotonic()\n"
        "while time.monotonic() - t < 1:\n"
        "    print('x')\n"
        "    time.sleep(0.001)"
    )
    async with Session(SubprocessExecutor()) as s:
        result = await s.run(code, on_output=lambda _s, t: got.append(t))
    assert "".join(got) == result.stdout
    assert result.stdout.count("x") > 50
    assert len(got) <= 1 / 0.05 + 2  # the first at once, then one per 50 ms at most
