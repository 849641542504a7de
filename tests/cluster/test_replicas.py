"""Stateless ``serve`` replicas: two real ``codemode serve`` processes sharing one Redis and
one Ray cluster serve one MCP session, whichever of them a call reaches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_process import INITIALIZE, PROTOCOL_VERSION, launch_serve

from .conftest import SESSION_RESOURCES, RayCluster, RedisServer, ray

pytestmark = pytest.mark.ray

TOKEN = "replica-token-0123456789"
TENANT_TOKENS = {"ACME_TOKEN": "acme-token-" + "a" * 32, "GLOBEX_TOKEN": "globex-token-" + "g" * 32}
HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


@dataclass
class Replica:
    proc: subprocess.Popen[str]
    url: str
    lines: list[str]
    drain: threading.Thread

    def kill(self) -> None:
        """SIGKILL: a replica that dies, with no chance to clean up."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.drain.join(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.drain.join(timeout=10)


def shared_config(cluster: RayCluster, redis_url: str) -> dict[str, Any]:
    """A workspace whose sessions replicas share: the ray executor and Redis storage."""
    return {
        "executor": "ray",
        "storage": "redis",
        "redis_url": redis_url,
        "ray": {
            "address": cluster.address,
            "resources": SESSION_RESOURCES,
            "memory_mb": 200,
            "start_timeout": 120,
        },
    }


def start_replica(
    base: Path, cluster: RayCluster, redis_url: str, *, tenants: Path | None = None
) -> Replica:
    """One ``serve`` replica: of the workspace ``base``, or of a ``tenants`` file."""
    base.mkdir(parents=True, exist_ok=True)
    if tenants is None:
        (base / "config.json").write_text(json.dumps(shared_config(cluster, redis_url)))
        where = ["--base", str(base)]
        env = {**os.environ, "CODEMODE_TOKEN": TOKEN}
    else:
        where = ["--tenants", str(tenants)]
        env = {**os.environ, **TENANT_TOKENS}
    argv = [sys.executable, "-m", "codemode", "serve", *where, "--transport", "http",
            "--port", "0"]  # fmt: skip
    served = launch_serve(argv, env, timeout=180)
    return Replica(served.proc, served.url, served.lines, served.drain)


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer, from a JSON body or the last event of an SSE stream."""
    response.raise_for_status()
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        answer: dict[str, Any] = json.loads(data[-1])
        return answer
    body: dict[str, Any] = response.json()
    return body


class McpSession:
    """One MCP session spoken over raw HTTP, so each call can go to any replica."""

    def __init__(self, first: Replica, token: str = TOKEN) -> None:
        self.http = httpx.Client(timeout=httpx.Timeout(30, read=240))
        auth = {**HEADERS, "Authorization": f"Bearer {token}"}
        r = self.http.post(first.url, json=INITIALIZE, headers=auth)
        _answer(r)
        self.sid = r.headers["mcp-session-id"]
        self.headers = {
            **auth,
            "Mcp-Session-Id": self.sid,
            "MCP-Protocol-Version": PROTOCOL_VERSION,
        }
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self.http.post(first.url, json=note, headers=self.headers).raise_for_status()
        self.seq = 1

    def close(self) -> None:
        self.http.close()

    def run(self, replica: Replica, code: str) -> dict[str, Any]:
        self.seq += 1
        call = {"jsonrpc": "2.0", "id": self.seq, "method": "tools/call",
                "params": {"name": "run_code", "arguments": {"code": code}}}  # fmt: skip
        answer = _answer(self.http.post(replica.url, json=call, headers=self.headers))
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result


def _value(result: dict[str, Any]) -> Any:
    assert not result.get("isError"), result
    return result["structuredContent"]["value"]


def _redis_records(url: str) -> dict[str, Any]:
    """The shared-session records in Redis: key -> JSON value."""
    import redis as redis_client

    r = redis_client.Redis.from_url(url)
    try:
        return {
            key.decode(): json.loads(r.get(key) or b"null")
            for key in r.scan_iter("codemode:replicas:*")
        }
    finally:
        r.close()


def _actor_names(namespace: str) -> list[str]:
    named = ray.util.list_named_actors(all_namespaces=True)
    return [n["name"] for n in named if n["namespace"] == namespace]


def test_a_session_moves_between_replicas_and_survives_a_killed_one(
    cluster: RayCluster, redis: RedisServer, tmp_path: Path
) -> None:
    a = start_replica(tmp_path / "a", cluster, redis.url)
    b = start_replica(tmp_path / "b", cluster, redis.url)
    s = McpSession(a)
    try:
        _value(s.run(a, "x = 41\nartifacts.save('report', {'deals': 3})"))
        # The same MCP session id on the other replica: same interpreter, same variables.
        assert _value(s.run(b, "x + 1")) == 42
        _value(s.run(b, "y = 'set on b'"))
        assert _value(s.run(a, "y")) == "set on b"
        # A replica dies between calls: the session and the stored data live on.
        a.kill()
        after = _value(s.run(b, "(x, y, artifacts.load('report'))"))
        assert after == [41, "set on b", {"deals": 3}]
        # The dead replica comes back (a fresh process): it adopts the session too.
        a = start_replica(tmp_path / "a", cluster, redis.url)
        assert _value(s.run(a, "x")) == 41
        # An id no replica issued is still refused.
        bogus = {**s.headers, "Mcp-Session-Id": "f" * 32}
        r = s.http.post(b.url, json={"jsonrpc": "2.0", "id": 99, "method": "tools/list"},
                        headers=bogus)  # fmt: skip
        assert r.status_code == 404
        # Redis holds hashes of the session id, never the id (a bearer secret) itself.
        stored = _redis_records(redis.url)
        assert len(stored) == 2 and s.sid not in json.dumps(stored)
        [actor] = [v["name"] for v in stored.values() if "name" in v]
        assert actor in _actor_names("codemode-default")
        # The client ends its session: its actor ends and no replica finds it again.
        assert s.http.delete(b.url, headers=s.headers).status_code < 300
        deadline = time.monotonic() + 60
        while actor in _actor_names("codemode-default") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert actor not in _actor_names("codemode-default")
        assert _redis_records(redis.url) == {}
        c = start_replica(tmp_path / "c", cluster, redis.url)
        try:
            call = {"jsonrpc": "2.0", "id": 100, "method": "tools/list"}
            assert s.http.post(c.url, json=call, headers=s.headers).status_code == 404
        finally:
            c.stop()
    finally:
        s.close()
        a.stop()
        b.stop()


def test_with_tenants_each_tenants_session_moves_between_replicas_and_stays_its_own(
    cluster: RayCluster, redis: RedisServer, tmp_path: Path
) -> None:
    tenants: dict[str, Any] = {}
    for name in ("acme", "globex"):
        ws = tmp_path / name
        ws.mkdir()
        config = {**shared_config(cluster, redis.url), "redis_prefix": f"codemode-{name}"}
        (ws / "config.json").write_text(json.dumps(config))
        tenants[name] = {"workspace": str(ws), "token_env": f"{name.upper()}_TOKEN"}
    spec = tmp_path / "tenants.json"
    spec.write_text(json.dumps({"tenants": tenants}))
    a = start_replica(tmp_path / "a", cluster, redis.url, tenants=spec)
    b = start_replica(tmp_path / "b", cluster, redis.url, tenants=spec)
    acme = McpSession(a, TENANT_TOKENS["ACME_TOKEN"])
    try:
        _value(acme.run(a, "x = 'acme on a'"))
        assert _value(acme.run(b, "x")) == "acme on a"
        # Another tenant holding acme's session id finds nothing, on either replica.
        other = {**acme.headers, "Authorization": f"Bearer {TENANT_TOKENS['GLOBEX_TOKEN']}"}
        call = {"jsonrpc": "2.0", "id": 50, "method": "tools/list"}
        for replica in (a, b):
            assert acme.http.post(replica.url, json=call, headers=other).status_code == 404
        # Each tenant's actors live in the tenant's own namespace.
        assert len(_actor_names("codemode-acme")) == 1
        assert _actor_names("codemode-globex") == []
        assert acme.http.delete(b.url, headers=acme.headers).status_code < 300
    finally:
        acme.close()
        a.stop()
        b.stop()
