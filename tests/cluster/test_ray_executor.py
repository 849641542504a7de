"""Sessions on a real local Ray cluster: the worker lives in an actor on another node,
in the same sandbox as a local session, and its tool calls come back to the host."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codemode import Session
from codemode.cluster import RayConfig, RayExecutor, RayWorker
from codemode.errors import ExecutorError, ToolError

from .conftest import SESSION_RESOURCES, RayCluster, ray

pytestmark = [pytest.mark.anyio, pytest.mark.ray]

REPO = Path(__file__).resolve().parents[2]


def executor(cluster: RayCluster, **options: object) -> RayExecutor:
    config = {
        "address": cluster.address,
        "resources": SESSION_RESOURCES,
        "memory_mb": 200,
        "start_timeout": 120.0,
        **{k: v for k, v in options.items() if k in RayConfig.model_fields},
    }
    rest = {"pool_size": 0, **{k: v for k, v in options.items() if k not in RayConfig.model_fields}}
    return RayExecutor(RayConfig.model_validate(config), **rest)  # type: ignore[arg-type]


def worker_of(session: Session) -> RayWorker:
    worker = session._worker
    assert isinstance(worker, RayWorker)
    return worker


SLEEPS_AFTER_PROBE = "tools.probe.ready()\nimport time; time.sleep(600)"


def probe(session: Session) -> asyncio.Event:
    """A host tool ``probe.ready`` the code calls once it runs; the event says it did."""
    started = asyncio.Event()

    def ready() -> bool:
        """The code calls this once it runs."""
        started.set()
        return True

    session.register_tool(ready, server="probe")
    return started


async def test_variables_persist_across_runs_on_a_remote_sandboxed_actor(
    cluster: RayCluster,
) -> None:
    async with Session(executor(cluster)) as s:
        assert (await s.run("x = 41")).error is None
        assert (await s.run("x + 1")).value == 42
        worker = worker_of(s)
        assert worker.node == cluster.node_of(worker.node).node_id != ""
        assert cluster.node_of(worker.node).name != "head"
        # The same sandbox as a local session: unprivileged uid, its own /workspace.
        r = await s.run("import os; (os.getuid(), os.getcwd())")
        assert r.value == [65534, "/workspace"] if os.geteuid() == 0 else r.value[1] == "/workspace"


async def test_tool_calls_are_served_by_the_host_process(cluster: RayCluster) -> None:
    host_pid = os.getpid()
    secret = "token-that-stays-on-the-host"

    def whoami() -> dict[str, object]:
        """Answers from the host: its pid, and a use of a credential only it holds."""
        return {"pid": os.getpid(), "signed": secret[::-1]}

    def refuse(reason: str) -> str:
        """Always fails."""
        raise ToolError(f"refused: {reason}")

    async with Session(executor(cluster)) as s:
        s.register_tool(whoami, server="host")
        s.register_tool(refuse, server="host")
        r = await s.run("answer = tools.host.whoami(); answer")
        assert r.error is None, r.error
        assert r.value == {"pid": host_pid, "signed": secret[::-1]}
        code = "try:\n    tools.host.refuse(reason='no')\nexcept ToolError as e:\n    msg = str(e)"
        r = await s.run(code + "\nmsg")
        assert r.error is None, r.error
        assert "refused: no" in r.value
        # The worker's environment never saw the secret.
        r = await s.run("import os; any('token-that' in v for v in os.environ.values())")
        assert r.value is False


async def test_timeouts_and_output_caps_hold_on_the_node(cluster: RayCluster) -> None:
    async with Session(executor(cluster, max_output=1_000)) as s:
        await s.run("kept = 'yes'")
        r = await s.run("while True: pass", timeout=1)
        assert r.timed_out and not r.state_lost
        assert r.error is not None and r.error.type == "Timeout"
        assert (await s.run("kept")).value == "yes"
        r = await s.run("print('a' * 5000)")
        assert r.stdout_truncated and "characters truncated" in r.stdout
        assert r.stdout.split("\n", 1)[0] == "a" * 1_000


async def test_code_that_ignores_the_interrupt_is_killed_on_the_node(cluster: RayCluster) -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "while True: time.sleep(0.01)"
    )
    async with Session(executor(cluster, interrupt_grace=0.5)) as s:
        await s.run("kept = 1")
        r = await s.run(code, timeout=1)
        assert r.timed_out and r.state_lost
        assert (await s.run("'kept' in globals()")).value is False


async def test_interrupt_stops_the_code_on_the_node_and_keeps_the_state(
    cluster: RayCluster,
) -> None:
    async with Session(executor(cluster)) as s:
        started = probe(s)
        await s.run("kept = 'yes'")
        run = asyncio.create_task(s.run(SLEEPS_AFTER_PROBE, 900))
        await asyncio.wait_for(started.wait(), 120)
        assert s.interrupt()
        r = await asyncio.wait_for(run, 120)
        assert r.error is not None and r.error.type == "KeyboardInterrupt"
        assert not r.state_lost
        assert (await s.run("kept")).value == "yes"


async def test_a_cancelled_run_stops_on_the_node_and_the_next_run_keeps_the_state(
    cluster: RayCluster,
) -> None:
    async with Session(executor(cluster)) as s:
        started = probe(s)
        await s.run("kept = 'yes'")
        run = asyncio.create_task(s.run(SLEEPS_AFTER_PROBE, 900))
        await asyncio.wait_for(started.wait(), 120)
        run.cancel()  # a client that went away: the code must stop on its node
        with pytest.raises(asyncio.CancelledError):
            await run
        after = await asyncio.wait_for(s.run("kept"), 60)  # not after the 600 s sleep
    assert after.value == "yes" and not after.state_lost


async def test_a_node_killed_mid_run_gives_state_lost_and_the_next_run_a_fresh_interpreter(
    cluster: RayCluster,
) -> None:
    async with Session(executor(cluster)) as s:
        started = probe(s)
        await s.run("kept = 'before'")
        worker = worker_of(s)
        victim = cluster.node_of(worker.node)
        sandboxed_pid = worker.pid
        run = asyncio.create_task(s.run(SLEEPS_AFTER_PROBE, 900))
        await asyncio.wait_for(started.wait(), 120)
        # A replacement machine joins; the one running the session dies.
        await asyncio.to_thread(cluster.add_node, f"spare{len(cluster.nodes)}")
        await asyncio.to_thread(victim.kill)
        r = await asyncio.wait_for(run, 180)
        assert r.state_lost
        assert r.error is not None and "Ray node running this session was lost" in r.error.message
        r = await s.run("'kept' in globals()")
        assert r.error is None and r.value is False
        assert worker_of(s).node != victim.node_id
        # The sandboxed worker died with its node: nothing is left running.
        deadline = time.monotonic() + 60
        while _alive(sandboxed_pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert not _alive(sandboxed_pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_actor_names_are_unguessable_and_scoped_per_tenant(cluster: RayCluster) -> None:
    async with (
        Session(executor(cluster, tenant="acme")) as a,
        Session(executor(cluster, tenant="acme")) as b,
    ):
        await a.run("1")
        await b.run("1")
        named = [
            n
            for n in ray.util.list_named_actors(all_namespaces=True)
            if n["namespace"] == "codemode-acme"
        ]
        names = [n["name"] for n in named]
        assert len(names) == 2 and names[0] != names[1]
        assert all(len(name) >= 32 for name in names)
    # Closing the session ends its actor.
    left = [
        n
        for n in ray.util.list_named_actors(all_namespaces=True)
        if n["namespace"] == "codemode-acme"
    ]
    assert left == []


def _actor_names(namespace: str) -> list[str]:
    named = ray.util.list_named_actors(all_namespaces=True)
    return [n["name"] for n in named if n["namespace"] == namespace]


async def _all_gone(namespace: str) -> bool:
    """ray.kill is asynchronous: the cluster forgets the names shortly after (bounded)."""
    deadline = time.monotonic() + 60
    while _actor_names(namespace) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return _actor_names(namespace) == []


async def test_a_session_starts_on_an_actor_the_pool_started_before(cluster: RayCluster) -> None:
    ex = executor(cluster, tenant="pool", pool_size=1)
    try:
        await ex.warm()
        ready = _actor_names("codemode-pool")
        assert len(ready) == 1
        async with Session(ex) as s:
            assert worker_of(s).info["name"] == ready[0]
            assert (await s.run("1 + 1")).value == 2
    finally:
        ex.close()
    assert await _all_gone("codemode-pool")


async def test_a_detached_actor_no_host_calls_any_more_ends_itself_once_idle(
    cluster: RayCluster,
) -> None:
    # Nothing calls the actor after this: its loop turns between calls, so the expiry fires.
    ex = executor(cluster, tenant="expiry")
    handle, info = await ex._launch(detached=True)
    await handle.expire_after.remote(0.5)
    assert _actor_names("codemode-expiry") == [info["name"]]
    assert await _all_gone("codemode-expiry")


async def test_an_idle_actor_is_reclaimed_and_the_next_run_says_so(cluster: RayCluster) -> None:
    async with Session(executor(cluster, idle_timeout=0.5)) as s:
        await s.run("x = 1")
        worker = worker_of(s)
        deadline = time.monotonic() + 30
        while worker.alive and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not worker.alive
        r = await s.run("'x' in globals()")
        assert r.value is False
        assert any("restarted" in w for w in r.warnings)


def _recorded_calls(worker: RayWorker) -> set[str]:
    """The actor's calls that Ray's task events recorded in the GCS (what the dashboard's
    task list shows; read the way ``ray.timeline`` reads them)."""
    from ray._private.state import state

    actor = worker._handle._actor_id.binary()
    events = state._get_all_task_events()
    return {e.task_info.name for e in events if e.task_info.actor_id == actor}


async def test_task_events_are_off_unless_asked_for(cluster: RayCluster) -> None:
    workers = {}
    for on in (False, True):
        async with Session(executor(cluster, task_events=on)) as s:
            for _ in range(3):
                assert (await s.run("1 + 1")).value == 2
            workers[on] = worker_of(s)
    deadline = time.monotonic() + 60  # actors report their events about once a second
    while "SessionActor.run" not in _recorded_calls(workers[True]):
        assert time.monotonic() < deadline, "task events asked for were never recorded"
        await asyncio.sleep(0.5)
    assert _recorded_calls(workers[False]) == set()


async def test_a_session_that_no_node_can_place_fails_clearly(cluster: RayCluster) -> None:
    ex = executor(cluster, memory_mb=10_000_000, start_timeout=3)
    with pytest.raises(ExecutorError, match="did not get placed on a node within 3 s"):
        await ex.start(_no_calls)


async def _no_calls(method: str, params: dict[str, object]) -> object:
    raise AssertionError(f"unexpected call {method}")


async def test_a_node_with_another_worker_protocol_is_refused_naming_both(
    cluster: RayCluster, tmp_path: Path
) -> None:
    import codemode_worker

    other = tmp_path / "other"
    shutil.copytree(Path(codemode_worker.__file__).parent, other / "codemode_worker")
    proto = other / "codemode_worker" / "protocol.py"
    proto.write_text(proto.read_text().replace("\nVERSION = 1\n", "\nVERSION = 99\n"))
    ex = executor(cluster, runtime_env={"env_vars": {"PYTHONPATH": str(other)}})
    with pytest.raises(ExecutorError) as info:
        await ex.start(_no_calls)
    message = str(info.value)
    assert "Ray node" in message
    assert "protocol version 99" in message and "version 1" in message


def test_an_unreachable_cluster_is_a_clear_error_naming_the_address(tmp_path: Path) -> None:
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    address = f"127.0.0.1:{port}"
    env = {**os.environ, "CODEMODE_RAY_ADDRESS": address, "CODEMODE_RAY_CONNECT_TIMEOUT": "2"}
    r = subprocess.run(
        [sys.executable, "-m", "codemode", "run", "--executor", "ray", "--no-tools",
         "--base", str(tmp_path / "ws"), "-c", "1"],
        capture_output=True, text=True, env=env, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert r.returncode != 0
    assert f"the Ray cluster at {address} cannot be reached" in r.stderr


JOIN_TWO = """
import sys
from codemode.cluster import RayConfig
from codemode.cluster.executor import connect
from codemode.errors import ConfigError

connect(RayConfig(address=sys.argv[1]))
connect(RayConfig(address=sys.argv[1]))  # the same cluster again: fine
try:
    connect(RayConfig(address="10.9.9.9:6379"))
except ConfigError as exc:
    print(exc)
"""


def test_a_second_workspace_asking_for_another_cluster_is_refused_naming_both(
    cluster: RayCluster,
) -> None:
    r = subprocess.run(
        [sys.executable, "-c", JOIN_TWO, cluster.address],
        capture_output=True, text=True, timeout=180, cwd=REPO,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"already joined the Ray cluster at {cluster.address}" in r.stdout
    assert "asks for the Ray cluster at 10.9.9.9:6379" in r.stdout
