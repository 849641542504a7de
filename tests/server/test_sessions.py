"""SessionManager with real codemode sessions (in-process workers: fast to start)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from codemode.context import CallContext
from codemode.errors import ExecutorError
from codemode.execution import InProcessExecutor
from codemode.server.sessions import SessionLimitReached, SessionManager
from codemode.session import Session

pytestmark = pytest.mark.anyio


class Clock:
    """A clock the test moves by hand, so expiry needs no sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def started() -> list[Session]:
    return []


@pytest.fixture
async def manager(started: list[Session]) -> AsyncIterator[SessionManager]:
    manager = make_manager(started)
    yield manager
    await manager.aclose()


def make_manager(started: list[Session], **kw: Any) -> SessionManager:
    executor = InProcessExecutor()

    async def factory(key: str | None) -> Session:
        session = Session(executor, context=CallContext(client=key))
        await session.start()
        started.append(session)
        return session

    return SessionManager(factory, **kw)


async def test_one_key_always_gets_the_same_session(manager: SessionManager) -> None:
    async with manager.lease("a") as first:
        await first.session.run("x = 1")
    async with manager.lease("a") as second:
        result = await second.session.run("x")
    assert (first.new, second.new, result.value) == (True, False, 1)


async def test_each_session_is_made_for_its_key_and_an_ephemeral_one_for_none(
    manager: SessionManager,
) -> None:
    async with manager.lease("mcp:abc") as keyed, manager.lease(None) as ephemeral:
        assert keyed.session.context.client == "mcp:abc"
        assert ephemeral.session.context.client is None
        assert keyed.session.context.session_id != ephemeral.session.context.session_id


async def test_concurrent_first_calls_for_one_key_start_one_session(
    manager: SessionManager, started: list[Session]
) -> None:
    async def use() -> None:
        async with manager.lease("k") as lease:
            await lease.session.run("1")

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(use)
    assert len(started) == 1


async def test_an_idle_session_expires_and_the_next_lease_says_so(started: list[Session]) -> None:
    clock = Clock()
    manager = make_manager(started, idle_timeout=60, clock=clock)
    try:
        async with manager.lease("a") as lease:
            await lease.session.run("x = 1")
        clock.now += 61
        assert await manager.sweep() == 1
        async with manager.lease("a") as again:
            result = await again.session.run("'x' in globals()")
    finally:
        await manager.aclose()
    assert started[0].closed
    assert again.new and again.notice is not None and "expired" in again.notice
    assert result.value is False


async def test_a_session_in_use_never_expires(started: list[Session]) -> None:
    clock = Clock()
    manager = make_manager(started, idle_timeout=60, clock=clock)
    try:
        async with manager.lease("a"):
            clock.now += 600
            assert await manager.sweep() == 0
        assert "a" in manager
    finally:
        await manager.aclose()


async def test_the_cap_refuses_a_new_client_with_a_clear_error(started: list[Session]) -> None:
    manager = make_manager(started, max_sessions=2)
    try:
        for key in ("a", "b"):
            async with manager.lease(key):
                pass
        with pytest.raises(SessionLimitReached, match="limit of 2 concurrent sessions"):
            async with manager.lease("c"):
                pass
        async with manager.lease("a"):  # known clients still get in
            pass
    finally:
        await manager.aclose()


async def test_expired_sessions_do_not_count_against_the_cap(started: list[Session]) -> None:
    clock = Clock()
    manager = make_manager(started, max_sessions=1, idle_timeout=10, clock=clock)
    try:
        async with manager.lease("a"):
            pass
        clock.now += 11
        async with manager.lease("b") as lease:
            assert lease.new
        assert manager.keys() == ["b"]
    finally:
        await manager.aclose()


async def test_an_ephemeral_lease_closes_its_session_afterwards(
    manager: SessionManager, started: list[Session]
) -> None:
    async with manager.lease(None) as lease:
        assert lease.ephemeral and len(manager) == 1
    assert started[0].closed and len(manager) == 0


async def test_drop_closes_a_session_at_once(
    manager: SessionManager, started: list[Session]
) -> None:
    async with manager.lease("gone"):
        pass
    assert await manager.drop("gone") is True
    assert started[0].closed and "gone" not in manager
    assert await manager.drop("gone") is False


async def test_aclose_closes_every_session_and_refuses_new_leases(
    manager: SessionManager, started: list[Session]
) -> None:
    for key in ("a", "b"):
        async with manager.lease(key):
            pass
    await manager.aclose()
    assert all(s.closed for s in started)
    with pytest.raises(Exception, match="shutting down"):
        async with manager.lease("c"):
            pass


async def test_a_session_that_cannot_start_fails_every_waiter_and_leaves_no_entry() -> None:
    calls = 0

    async def broken(key: str | None) -> Session:
        nonlocal calls
        calls += 1
        await anyio.sleep(0.01)
        raise ExecutorError("no worker today")

    manager = SessionManager(broken)
    errors: list[BaseException] = []

    async def use() -> None:
        try:
            async with manager.lease("k"):
                pass
        except ExecutorError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(use)
    assert calls == 1 and len(errors) == 3 and "k" not in manager
