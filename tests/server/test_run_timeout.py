"""A client's ``run_code`` timeout is the client's wish, not a right to hold a worker for
ever: ``codemode serve`` lowers it to its maximum (and says so) and refuses one that is
not a positive finite number."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from .conftest import stdio_client
from .test_stdio_wire import INIT, Raw


def _call(n: int, code: str, timeout: str | None = None) -> bytes:
    # ``Infinity`` is not JSON, but Python's and pydantic's parsers accept it: a raw line.
    arguments = f'{{"code": {json.dumps(code)}' + (f', "timeout": {timeout}}}' if timeout else "}")
    head = f'{{"jsonrpc": "2.0", "id": {n}, "method": "tools/call", "params": '
    return (head + f'{{"name": "run_code", "arguments": {arguments}}}}}').encode()


@pytest.mark.anyio
async def test_a_huge_timeout_is_lowered_to_the_servers_maximum_with_a_warning(
    workspace: tuple[Path, Path],
) -> None:
    base, _ = workspace
    (base / "config.json").write_text(json.dumps({"budget": {"run": {"wall_time": 2}}}))
    async with stdio_client(base) as client:
        started = time.monotonic()
        stopped = await client.call_tool(
            "run_code", {"code": "import time\ntime.sleep(30)", "timeout": 1e308}
        )
        took = time.monotonic() - started
        fine = await client.call_tool("run_code", {"code": "1 + 1", "timeout": 1e308})
    assert stopped.is_error and stopped.structured_content is not None
    assert stopped.structured_content["timed_out"] is True
    assert took < 25, f"the run held its worker for {took:.0f} s"
    for result in (stopped, fine):
        assert result.structured_content is not None
        warnings = result.structured_content["warnings"]
        assert any("lowered from 1e+308 s" in w and "maximum of 2 s" in w for w in warnings)
    assert fine.structured_content is not None and fine.structured_content["value"] == 2


@pytest.mark.anyio
async def test_a_timeout_within_the_maximum_runs_without_a_warning(
    workspace: tuple[Path, Path],
) -> None:
    base, _ = workspace
    async with stdio_client(base) as client:
        result = await client.call_tool("run_code", {"code": "1 + 1", "timeout": 3599})
    assert result.structured_content is not None
    assert result.structured_content["value"] == 2
    assert result.structured_content["warnings"] == []


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", "-5", "0"])
def test_a_timeout_that_is_not_a_positive_finite_number_is_refused_clearly(
    workspace: tuple[Path, Path], value: str
) -> None:
    raw = Raw(workspace[0])
    try:
        assert raw.ask(INIT)["id"] == 0
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        got = raw.ask(_call(1, "print('ran')", value))
        after = raw.ask(_call(2, "print('still serving')"))
    finally:
        raw.close()
    result = got["result"]
    text = result["content"][0]["text"]
    assert result["isError"] is True, text
    assert "timeout" in text and "ran" not in text
    assert "finite" in text or "greater than 0" in text
    assert after["result"]["content"][0]["text"].strip() == "still serving"
