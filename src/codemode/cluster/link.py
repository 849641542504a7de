"""The direct link: a run's messages over one TCP stream from the host to its actor.

Ray places a session's actor, watches its life and carries everything but the runs
(start, versions, interrupt when the link is down, close, node loss). A run over Ray is
one actor call each way, and Ray's own floor for that is most of a run's added time
(~0.75 ms on a 2-core VM, docs/ray.md); the same messages over a stream the actor opens
cost a loopback or LAN round trip. The link carries exactly the relay's messages (the
same ``run``/``poll``/``reply``/``hold``/``interrupt``, the same packed events), so the
host falls back to the Ray calls at any point: a broken link loses nothing, because runs
are named by a random id and event batches are numbered (:class:`codemode.cluster.actor.
_Session` resends the last batch to a poll that did not see it).

Who may connect: whoever knows the session's secret, 32 random bytes the actor makes and
hands out only through its Ray ``link`` call, so the link trusts exactly whom Ray trusts
(run Ray with token authentication: docs/ray.md). The secret never crosses the stream:
the actor sends a fresh nonce, the host answers HMAC-SHA256(secret, "host" + nonce) and
a nonce of its own, and a wrong or late answer closes the stream before a single message
is read. The actor then proves the secret too (HMAC of "actor" + the host's nonce): the
host sends a run's code and its tools' results, and unmarshals what comes back, only to
a peer that knows the secret, never to whatever answers at that address (a process that
took the port of a dead actor, a spoofed address). At most ``MAX_UNPROVEN`` connections
wait for their proof at once (the oldest is dropped for a newcomer), so a flood of
connections that never authenticate cannot use up the actor's file descriptors. The
actor listens on its node's own address (the one Ray uses), on a port the OS picks.

After the handshake every frame is authenticated: 4-byte big-endian length, the
``marshal`` data (plain tuples; both ends are codemode of the same release: ``hello``
checks the relay version), then a 16-byte tag, HMAC-SHA256 under a key of this stream
alone (derived from the secret and both nonces) over the direction, the frame's number in
its direction (counted by both ends, never sent) and the data. Whatever can reach the
stream can neither forge, alter, replay nor reorder frames, nor drop one unnoticed (the
next frame's tag is then wrong): the first frame whose tag is wrong closes the stream with
a warning, before it is unmarshalled, and the host goes on over Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import marshal
import os
import secrets
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("codemode.cluster")

RUN, POLL, REPLY, HOLD, INTERRUPT = "run", "poll", "reply", "hold", "interrupt"
"""Host -> actor messages: ``(op, arg)``. ``run`` and ``poll`` are answered (a packed
event batch, or an :data:`ERROR` frame); the others are not."""
ERROR = -1
"""An answer ``marshal((ERROR, message))``: the actor's session raised (as a Ray call would)."""

NONCE = 32
AUTH_TIMEOUT = 5.0
"""Seconds a connecting peer has to prove it knows the secret."""
MAX_UNPROVEN = 32
"""Connections waiting for their proof at once; a newcomer past this drops the oldest."""
_DOMAIN = b"codemode-link-3"  # -3: frames carry tags
_LEN = struct.Struct(">I")
MAX_FRAME = 1 << 30
KEEPALIVE = (5, 5, 3)
"""TCP keepalive of the link (idle s, interval s, probes): a node gone without a word (power
lost, network cut) ends the stream in ~20 s, about when Ray declares the node dead; the
host then polls over Ray and hears of the loss. Without it a read waits forever."""
HOST, ACTOR = b"host", b"actor"
"""Who proves: each side's proof is of its own kind, so neither can be reflected back."""


def proof(secret: bytes, nonce: bytes, who: bytes = HOST) -> bytes:
    return hmac.new(secret, _DOMAIN + who + b"\x00" + nonce, hashlib.sha256).digest()


TAG = 16
"""Bytes of a frame's tag (HMAC-SHA256 cut to 128 bits)."""
_SEQ = struct.Struct(">Q")


def frame_key(secret: bytes, actor_nonce: bytes, host_nonce: bytes) -> bytes:
    """The key of one stream's frames: both nonces are fresh, so no frame of another
    stream (an earlier link of the same session) verifies on this one."""
    material = _DOMAIN + b"frames\x00" + actor_nonce + host_nonce
    return hmac.new(secret, material, hashlib.sha256).digest()


class BadFrame(ValueError):
    """A frame whose tag is wrong: altered, forged, replayed, reordered or one dropped."""


class Seal:
    """Tags (or checks) the frames of one direction of a stream, numbering them."""

    __slots__ = ("_mac", "_seq")

    def __init__(self, key: bytes, who: bytes) -> None:
        self._mac = hmac.new(key, who + b"\x00", hashlib.sha256)
        self._seq = 0

    def tag(self, data: bytes | memoryview) -> bytes:
        mac = self._mac.copy()
        mac.update(_SEQ.pack(self._seq))
        mac.update(data)
        self._seq += 1
        return mac.digest()[:TAG]


def _keepalive(writer: asyncio.StreamWriter) -> None:
    """Probe an idle stream, and bound how long sent data may go unacknowledged."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    idle, interval, probes = KEEPALIVE
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):  # Linux; elsewhere the system's defaults
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, probes)
        if hasattr(socket, "TCP_USER_TIMEOUT"):
            limit = (idle + interval * probes) * 1000
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, limit)


def _frame(data: bytes, seal: Seal) -> bytes:
    return b"".join((_LEN.pack(len(data)), data, seal.tag(data)))


async def _read(reader: asyncio.StreamReader, seal: Seal) -> memoryview:
    """The next frame's data, once its tag is right (``BadFrame`` otherwise)."""
    (size,) = _LEN.unpack(await reader.readexactly(_LEN.size))
    if size > MAX_FRAME:
        raise ValueError(f"a link frame of {size} bytes")
    got = memoryview(await reader.readexactly(size + TAG))
    data = got[:size]
    if not hmac.compare_digest(seal.tag(data), got[size:]):
        raise BadFrame(
            "a link frame failed its authentication (altered, forged, replayed or out of order)"
        )
    return data


class LinkBroken(Exception):
    """The stream failed or closed: the caller goes on over Ray."""


class LinkFailed(Exception):
    """The actor's session raised while answering (as an actor call would)."""


# -- the actor's side ------------------------------------------------------------------


Answer = Callable[[str, Any], Awaitable[bytes]]
"""Answers ``run``/``poll`` with a packed batch."""
Tell = Callable[[str, Any], None]
"""Takes ``reply``/``hold``/``interrupt``."""


class LinkServer:
    """Listens for the host's streams on the node's address; runs on the session's loop."""

    def __init__(self, answer: Answer, tell: Tell) -> None:
        self.secret = secrets.token_bytes(32)
        self._answer = answer
        self._tell = tell
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._unproven: dict[asyncio.StreamWriter, None] = {}
        """Connections still to prove the secret, oldest first."""

    async def open(self, host: str) -> tuple[str, int]:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, host, 0)
        port = self._server.sockets[0].getsockname()[1]
        return host, int(port)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        tasks = list(self._conns)
        for task in tasks:
            task.cancel()
        # Their streams are closed as they end (``_serve``'s finally), not left to the GC.
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        pending: asyncio.Task[None] | None = None
        unproven = self._unproven
        if len(unproven) >= MAX_UNPROVEN:  # a flood: the oldest waiting one goes
            oldest = next(iter(unproven))
            del unproven[oldest]
            oldest.close()  # its read ends (the connection is closed under it)
        unproven[writer] = None
        try:
            nonce = os.urandom(NONCE)
            writer.write(nonce)
            try:
                got = await asyncio.wait_for(reader.readexactly(32 + NONCE), AUTH_TIMEOUT)
            except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                return
            if writer not in unproven:  # dropped for a newcomer while it answered
                return
            del unproven[writer]
            if not hmac.compare_digest(got[:32], proof(self.secret, nonce, HOST)):
                log.warning("a link connection from %s was refused: wrong secret", _peer(writer))
                return
            writer.write(proof(self.secret, got[32:], ACTOR))  # accepted: the actor's proof
            key = frame_key(self.secret, nonce, got[32:])
            heard, said = Seal(key, HOST), Seal(key, ACTOR)
            _keepalive(writer)  # a host gone without a word: its pending poll ends
            while True:
                op, arg = marshal.loads(await _read(reader, heard))
                if op in (RUN, POLL):
                    # Answered when its events come; replies keep arriving meanwhile.
                    ask = self._ask(writer, said, op, arg)
                    pending = asyncio.get_running_loop().create_task(ask)
                else:
                    self._tell(op, arg)
        except BadFrame as exc:
            log.warning("%s from %s: the link is closed", exc, _peer(writer))
        except (asyncio.IncompleteReadError, OSError, ValueError, EOFError, TypeError):
            pass  # the host went away (or spoke nonsense): it goes on over Ray
        finally:
            unproven.pop(writer, None)
            if pending is not None:
                pending.cancel()
            writer.close()
            self._conns.discard(task)

    async def _ask(self, writer: asyncio.StreamWriter, said: Seal, op: str, arg: Any) -> None:
        try:
            data = await self._answer(op, arg)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the host as the call's failure
            data = marshal.dumps((ERROR, f"{type(exc).__name__}: {exc}"))
        if not writer.is_closing():
            writer.write(_frame(data, said))  # tagged as written: numbers follow the stream


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "?"


# -- the host's side -------------------------------------------------------------------


class Link:
    """One authenticated stream to a session's actor (host side; one ``ask`` at a time)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: bytes
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._said = Seal(key, HOST)
        self._heard = Seal(key, ACTOR)
        self.broken = False

    @classmethod
    async def connect(cls, host: str, port: int, secret: bytes, timeout: float) -> Link:
        """Raises ``OSError``/``TimeoutError`` when the node cannot be reached, and
        ``LinkBroken`` when it refuses the secret."""
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                nonce = await reader.readexactly(NONCE)
                mine = os.urandom(NONCE)
                writer.write(proof(secret, nonce, HOST) + mine)
                got = await reader.readexactly(32)
            except asyncio.IncompleteReadError:
                writer.close()
                raise LinkBroken("the session's actor refused the link") from None
            except BaseException:
                writer.close()
                raise
            if not hmac.compare_digest(got, proof(secret, mine, ACTOR)):
                writer.close()
                raise LinkBroken("the peer at the link's address does not know the secret")
        _keepalive(writer)
        return cls(reader, writer, frame_key(secret, nonce, mine))

    def tell(self, op: str, arg: Any) -> None:
        """A message that has no answer (``reply``, ``hold``, ``interrupt``)."""
        if self.broken:
            raise LinkBroken("the link is closed")
        try:
            self._writer.write(_frame(marshal.dumps((op, arg)), self._said))
        except (OSError, RuntimeError, ValueError) as exc:
            self.close()
            raise LinkBroken(str(exc)) from exc

    async def ask(self, op: str, arg: Any) -> tuple[int, Any]:
        """``run``/``poll``: the event batch ``(seq, events)``. Any failure (or a cancel,
        which leaves a frame half read) closes the link."""
        self.tell(op, arg)
        try:
            seq, events = marshal.loads(await _read(self._reader, self._heard))
        except BadFrame as exc:
            self.close()
            log.warning("%s from the session's actor: the link is closed", exc)
            raise LinkBroken(str(exc)) from exc
        # OSError: ETIMEDOUT (keepalive) and EHOSTUNREACH are not ConnectionErrors.
        except (asyncio.IncompleteReadError, OSError, ValueError, EOFError) as exc:
            self.close()
            raise LinkBroken(str(exc) or type(exc).__name__) from exc
        except BaseException:
            self.close()
            raise
        if seq == ERROR:
            raise LinkFailed(str(events))
        return seq, events

    def close(self) -> None:
        self.broken = True
        with contextlib.suppress(Exception):
            self._writer.close()


LINK_TIMEOUT = 5.0
"""Seconds to learn the link's address from the actor and connect."""
RETRY_AFTER = 2.0
RETRY_MAX = 120.0
"""A link that could not be opened is tried again after 2 s, doubling up to this."""


class LinkKeeper:
    """The host's link to one actor: opened in the background (runs go over Ray until it
    is up), opened again after a break, backing off while the node cannot be reached."""

    def __init__(self, where: Callable[[], Awaitable[tuple[str, int, bytes]]]) -> None:
        self._where = where
        self._link: Link | None = None
        self._opening: asyncio.Task[None] | None = None
        self._failures = 0
        self._retry_at = 0.0
        self._closed = False

    @property
    def up(self) -> Link | None:
        link = self._link
        return link if link is not None and not link.broken else None

    def want(self) -> None:
        """Open the link unless it is up, opening, or backing off."""
        if self._closed or self.up is not None or self._opening is not None:
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= self._retry_at:
            self._opening = loop.create_task(self._open())

    async def _open(self) -> None:
        try:
            host, port, secret = await asyncio.wait_for(self._where(), LINK_TIMEOUT)
            link = await Link.connect(host, port, secret, LINK_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - any failure: runs stay on Ray
            self._failures += 1
            delay = min(RETRY_AFTER * 2 ** (self._failures - 1), RETRY_MAX)
            self._retry_at = asyncio.get_running_loop().time() + delay
            level = logging.WARNING if self._failures == 1 and not self._closed else logging.DEBUG
            log.log(
                level,
                "the direct link to a session's actor could not be opened (%s: %s); its "
                "runs go over Ray calls (slower) and the link is tried again in %g s",
                type(exc).__name__,
                exc,
                delay,
            )
            return
        finally:
            self._opening = None
        if self._closed:
            link.close()
            return
        self._failures = 0
        self._link = link

    def close(self) -> None:
        self._closed = True
        if self._opening is not None:
            self._opening.cancel()
        if self._link is not None:
            self._link.close()
