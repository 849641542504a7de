"""Joining the Ray cluster (once per process, failing fast with the address named),
checking what a node speaks, and saying what went wrong there in a line."""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

from ..errors import ConfigError, ExecutorError
from ..execution.base import check_protocol
from .actor import RELAY_VERSION, versions
from .config import RayConfig

EXTRA_HINT = "the ray executor needs Ray: pip install 'codemode[ray]'"

_connect_lock = threading.Lock()


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(EXTRA_HINT) from exc
    return ray


def _probe(address: str, timeout: float) -> None:
    """Fail fast, naming the address, when nothing listens there (``ray.init`` would
    retry for minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"ray.address {address!r} is not host:port (or auto)")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout).close()
    except OSError as exc:
        raise ExecutorError(
            f"the Ray cluster at {address} cannot be reached ({exc}). Start it "
            f"(`ray start --head --port={port}` on the head node) or fix ray.address "
            "(CODEMODE_RAY_ADDRESS)"
        ) from None


_joined: list[str] = []
"""The ``ray.address`` this process joined through :func:`connect` ("" for a private
local Ray); empty when it joined some other way (the application's own ``ray.init``)."""


def connect(config: RayConfig) -> None:
    """Join the cluster once per process (a process already connected keeps its link).

    Ray joins one cluster per process: a workspace asking for another one (a tenant of
    ``serve --tenants`` with its own ``ray.address``) is refused, not silently placed on
    the first."""
    ray = _ray()
    with _connect_lock:
        if ray.is_initialized():
            wanted = config.address or ""
            if _joined and "auto" not in (wanted, _joined[0]) and wanted != _joined[0]:
                raise ConfigError(
                    f"this process already joined {_where(_joined[0])}; ray.address asks "
                    f"for {_where(wanted)}. A process joins one Ray cluster: give every "
                    "workspace it serves (every tenant of serve --tenants) the same ray.address"
                )
            return
        address = config.address
        options: dict[str, Any] = {
            "namespace": config.namespace,
            "logging_level": logging.WARNING,
            "log_to_driver": False,
        }
        if address is None:
            options["include_dashboard"] = False
        elif address != "auto":
            _probe(address, config.connect_timeout)
        try:
            ray.init(address=address, **options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ExecutorError(
                f"cannot join the Ray cluster at {address or 'a new local Ray'}: {exc}"
            ) from exc
        _joined[:] = [address or ""]


def _where(address: str) -> str:
    return f"the Ray cluster at {address}" if address else "a private local Ray (no ray.address)"


def check_versions(info: dict[str, Any]) -> None:
    """The node must speak this host's protocols (same codemode release on both sides)."""
    where = f"Ray node {info.get('ip', '?')} ({str(info.get('node', '?'))[:12]})"
    ours = versions()
    try:
        check_protocol(info.get("worker_protocol"))
        check_protocol(info.get("protocol"))
    except ExecutorError as exc:
        raise ExecutorError(
            f"{where}: {exc} (host: codemode {ours['release']}, node: codemode "
            f"{info.get('release')})"
        ) from None
    if info.get("relay") != RELAY_VERSION:
        raise ExecutorError(
            f"{where} relays protocol version {info.get('relay')}, this host speaks version "
            f"{RELAY_VERSION}: install the same codemode release on both sides"
        )


def _why(exc: BaseException) -> str:
    """A Ray error in a line or a few: its cause when it carries one."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}"
    text = str(exc).strip()
    return text if len(text) < 1500 else text[:1500] + " ..."
