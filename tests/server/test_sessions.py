"""SessionManager with real codemode sessions (in-process workers: fast to start)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest

from codemode.context import CallContext
from codemode.errors import ExecutorError
from codemode.execution import InProcessExecutor
from codemode.server.session_records import ServerBusy, SessionLimitReached, ShuttingDown
from codemode.server.sessions import SessionManager
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


async def test_a_call_on_a_started_free_session_gets_it_without_a_turn_of_the_loop(
    manager: SessionManager,
) -> None:
    """On a saturated loop each turn costs a call tens of ms: borrowing an idle session
    (its lock free, its start long done) must not give the loop away."""
    async with manager.lease("a"):
        pass
    others_ran = anyio.Event()
    asyncio.get_running_loop().call_soon(others_ran.set)
    async with manager.lease("a") as lease:
        assert not others_ran.is_set(), "borrowing the session yielded to the loop"
        assert not lease.new


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


async def test_shared_sessions_end_here_without_telling_their_client_of_a_loss(
    started: list[Session],
) -> None:
    """Replicas sharing sessions (docs/ray.md): the session lives on elsewhere, so a lease
    after this replica let go of it carries no "expired" notice."""
    clock = Clock()
    manager = make_manager(started, idle_timeout=60, shared=True, clock=clock)
    try:
        async with manager.lease("a"):
            pass
        clock.now += 61
        assert await manager.sweep() == 1
        async with manager.lease("a") as again:
            pass
    finally:
        await manager.aclose()
    assert started[0].closed
    assert again.new and again.notice is None


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
    manager = make_manager(started, max_sessions=2, queue_size=0)
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


# --------------------------------------------------------------------------- admission


async def _hold(manager: SessionManager, key: str, release: anyio.Event) -> None:
    async with manager.lease(key):
        await release.wait()


async def test_beyond_the_cap_a_client_waits_and_gets_the_first_freed_slot(
    started: list[Session],
) -> None:
    manager = make_manager(started, max_sessions=1, queue_timeout=30)
    got: list[str] = []

    async def want(key: str) -> None:
        async with manager.lease(key) as lease:
            got.append(lease.key or "")

    try:
        async with anyio.create_task_group() as tg:
            async with manager.lease("first"):
                tg.start_soon(want, "second")
                await wait_until(lambda: manager.queued == 1)
                assert got == []
            await manager.drop("first")  # its client ended its session: a slot frees
        assert got == ["second"] and manager.keys() == ["second"]
    finally:
        await manager.aclose()


async def test_a_client_that_waits_too_long_is_told_to_retry_after_some_seconds(
    started: list[Session],
) -> None:
    clock = Clock()
    manager = make_manager(started, max_sessions=1, queue_timeout=0.05, clock=clock)
    try:
        async with manager.lease("a"):
            pass
        clock.now += 20  # "a" is idle: it expires 1780 s from now
        with pytest.raises(ServerBusy, match=r"no session slot freed up within 0.05 s") as busy:
            async with manager.lease("b"):
                pass
    finally:
        await manager.aclose()
    assert busy.value.retry_after == 60  # bounded: a guess that far out helps nobody
    assert f"Retry after {busy.value.retry_after} s" in str(busy.value)
    assert manager.queued == 0


async def test_freed_slots_go_to_waiting_clients_in_turn(started: list[Session]) -> None:
    manager = make_manager(started, max_sessions=2, queue_timeout=30)
    order: list[str] = []

    async def want(client: str, key: str) -> None:
        async with manager.lease(key, client=client):
            order.append(client)

    release = [anyio.Event(), anyio.Event()]
    try:
        async with anyio.create_task_group() as tg:
            for i, event in enumerate(release):
                tg.start_soon(_hold, manager, f"held{i}", event)
            await wait_until(lambda: len(manager) == 2)
            for i in range(3):  # a burst from one client first...
                tg.start_soon(want, "burst", f"b{i}")

                def queued(n: int = i + 1) -> bool:
                    return manager.queued == n

                await wait_until(queued)
            tg.start_soon(want, "other", "o")  # ...then one request from another
            await wait_until(lambda: manager.queued == 4)
            for event in release:
                event.set()
                await manager.drop(f"held{release.index(event)}")
            await wait_until(lambda: len(order) == 2)
            tg.cancel_scope.cancel()
    finally:
        await manager.aclose()
    assert sorted(order[:2]) == ["burst", "other"]  # the other client did not wait behind it


async def test_a_burst_that_fills_the_queue_cannot_keep_another_client_out(
    started: list[Session],
) -> None:
    manager = make_manager(started, max_sessions=1, queue_size=2, queue_timeout=30)
    refused: list[str] = []

    async def want(client: str, key: str) -> None:
        try:
            async with manager.lease(key, client=client):
                pass
        except ServerBusy as exc:
            refused.append(f"{client}: {exc}")

    release = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_hold, manager, "held", release)
            await wait_until(lambda: len(manager) == 1)
            for i in range(2):
                tg.start_soon(want, "burst", f"b{i}")
            await wait_until(lambda: manager.queued == 2)
            tg.start_soon(want, "other", "o")
            await wait_until(lambda: len(refused) == 1)
            assert manager.queued == 2
            tg.start_soon(want, "burst", "b-late")  # the burst's next one is refused itself
            await wait_until(lambda: len(refused) == 2)
            release.set()
            tg.cancel_scope.cancel()
    finally:
        await manager.aclose()
    assert refused[0].startswith("burst: ") and "given to another client" in refused[0]
    assert refused[1].startswith("burst: ") and "already waiting" in refused[1]


async def test_stopping_refuses_new_calls_and_everyone_waiting(started: list[Session]) -> None:
    manager = make_manager(started, max_sessions=1, queue_timeout=30)
    errors: list[BaseException] = []

    async def want(key: str) -> None:
        try:
            async with manager.lease(key):
                pass
        except ShuttingDown as exc:
            errors.append(exc)

    release = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_hold, manager, "held", release)
            await wait_until(lambda: len(manager) == 1)
            tg.start_soon(want, "waiting")
            await wait_until(lambda: manager.queued == 1)
            manager.stop_admitting()
            await wait_until(lambda: len(errors) == 1)
            await want("held")  # even a known client's new call
            release.set()
    finally:
        await manager.aclose()
    assert len(errors) == 2 and all("shutting down" in str(e) for e in errors)


# --------------------------------------------------------------------------- reclaim


async def test_a_session_whose_client_is_gone_is_reclaimed_after_the_grace(
    started: list[Session],
) -> None:
    clock = Clock()
    manager = make_manager(started, reclaim_after=120, clock=clock)
    try:
        manager.attach("mcp:x")  # its event stream
        async with manager.lease("mcp:x") as lease:
            await lease.session.run("v = 1")
        clock.now += 600
        assert await manager.sweep() == 0  # still connected
        manager.detach("mcp:x")  # the stream closed
        clock.now += 119
        assert await manager.sweep() == 0
        clock.now += 2
        assert await manager.sweep() == 1
        async with manager.lease("mcp:x") as again:
            pass
    finally:
        await manager.aclose()
    assert started[0].closed
    assert again.new and again.notice is not None and "connection was gone" in again.notice


async def test_a_request_within_the_grace_keeps_the_session(started: list[Session]) -> None:
    clock = Clock()
    manager = make_manager(started, reclaim_after=120, clock=clock)
    try:
        manager.attach("mcp:x")
        manager.detach("mcp:x")
        clock.now += 100
        manager.attach("mcp:x")  # a request came
        async with manager.lease("mcp:x"):
            pass
        manager.detach("mcp:x")
        clock.now += 100
        assert await manager.sweep() == 0
    finally:
        await manager.aclose()


async def test_a_session_with_a_call_in_progress_is_never_reclaimed(
    started: list[Session],
) -> None:
    clock = Clock()
    manager = make_manager(started, reclaim_after=1, clock=clock)
    try:
        manager.attach("mcp:x")
        manager.detach("mcp:x")
        async with manager.lease("mcp:x"):
            clock.now += 600
            assert await manager.sweep() == 0
    finally:
        await manager.aclose()


async def test_sessions_named_by_their_client_only_expire_when_idle(
    started: list[Session],
) -> None:
    clock = Clock()
    manager = make_manager(started, reclaim_after=1, idle_timeout=600, clock=clock)
    try:
        async with manager.lease("client:agent-7"):
            pass
        clock.now += 300  # no connection all that time: a Codemode-Session client
        assert await manager.sweep() == 0
        clock.now += 301
        assert await manager.sweep() == 1
    finally:
        await manager.aclose()


async def wait_until(predicate: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not predicate():
            await anyio.sleep(0.001)


async def test_no_more_sessions_start_at_once_than_allowed() -> None:
    executor = InProcessExecutor()
    starting = peak = 0

    async def factory(key: str | None) -> Session:
        nonlocal starting, peak
        starting += 1
        peak = max(peak, starting)
        await anyio.sleep(0.01)  # a worker booting
        session = Session(executor)
        await session.start()
        starting -= 1
        return session

    manager = SessionManager(factory, start_concurrency=3)

    async def use(key: str) -> None:
        async with manager.lease(key):
            pass

    try:
        async with anyio.create_task_group() as tg:
            for i in range(12):
                tg.start_soon(use, f"k{i}")
        opened = len(manager)
    finally:
        await manager.aclose()
    assert peak == 3 and opened == 12


async def test_managers_sharing_a_process_cap_hand_freed_slots_to_each_others_waiters(
    started: list[Session],
) -> None:
    """serve --tenants: each tenant's manager may hold 2, the process 2 in all; a slot
    tenant a frees goes to tenant b's waiting client, not to a's own newcomer first."""
    from codemode.server.session_cap import SessionCap

    cap = SessionCap(2)
    a = make_manager(started, max_sessions=2, queue_timeout=30, cap=cap)
    b = make_manager(started, max_sessions=2, queue_timeout=30, cap=cap)
    got: list[str] = []

    async def want(manager: SessionManager, key: str) -> None:
        async with manager.lease(key):
            got.append(key)

    try:
        async with a.lease("a1"), a.lease("a2"):
            assert cap.used == 2
        with pytest.raises(ServerBusy, match="across all tenants"):
            b2 = make_manager(started, max_sessions=2, queue_timeout=0, queue_size=0, cap=cap)
            try:
                async with b2.lease("b0"):
                    pass
            finally:
                await b2.aclose()
        async with anyio.create_task_group() as tg:
            tg.start_soon(want, b, "b1")
            await wait_until(lambda: b.queued == 1)
            await a.drop("a1")
            await wait_until(lambda: got == ["b1"])
        assert cap.used == 2 and len(a) == 1 and len(b) == 1
        await a.aclose()
        assert cap.used == 1  # a closed tenant gives its slots back
    finally:
        await a.aclose()
        await b.aclose()


async def test_with_nobody_else_waiting_one_client_may_use_every_slot(
    started: list[Session],
) -> None:
    # The share only bounds a client while another waits: a burst from one address (a
    # load test on loopback) is not cut to half the server.
    manager = make_manager(started, max_sessions=4, client_share=0.5)
    try:
        for i in range(4):
            async with manager.lease(f"k{i}", client="one"):
                pass
        assert len(manager) == 4
    finally:
        await manager.aclose()


def test_a_client_share_outside_0_to_1_is_refused() -> None:
    for share in (0.0, 1.5):
        with pytest.raises(ValueError, match="client_share"):
            make_manager([], client_share=share)


async def test_a_client_share_of_1_never_refuses_a_client_for_its_share(
    started: list[Session],
) -> None:
    manager = make_manager(started, max_sessions=1, client_share=1.0, queue_timeout=30)
    got: list[str] = []

    async def want(client: str, key: str) -> None:
        async with manager.lease(key, client=client):
            got.append(key)

    release = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_hold, manager, "held", release)  # the client "" holds the slot
            await wait_until(lambda: len(manager) == 1)
            tg.start_soon(want, "other", "o")
            await wait_until(lambda: manager.queued == 1)
            tg.start_soon(want, "", "mine")  # queued behind, not refused
            await wait_until(lambda: manager.queued == 2)
            release.set()
            await manager.drop("held")
            await wait_until(lambda: len(got) == 1)
            await manager.drop("o")
            await wait_until(lambda: len(got) == 2)
    finally:
        await manager.aclose()
    assert got == ["o", "mine"]
