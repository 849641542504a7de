"""No network: not the host's loopback, not the internet, not DNS, not host unix sockets."""

from __future__ import annotations

import errno
import os
import socket
import tempfile
import threading
from collections.abc import Iterator

import pytest

from .conftest import Arena, blocked

pytestmark = [pytest.mark.anyio, pytest.mark.security]


class Listener:
    """A server on the host that records whether anything ever connected."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.connected = threading.Event()
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connected.set()
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def tcp_server() -> Iterator[Listener]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    listener = Listener(s)
    yield listener
    listener.close()


@pytest.fixture
def unix_server() -> Iterator[tuple[Listener, str]]:
    d = tempfile.mkdtemp(prefix="cm-sec-sock-", dir="/var/tmp")
    os.chmod(d, 0o755)
    path = os.path.join(d, "host.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o777)
    listener = Listener(s)
    yield listener, path
    listener.close()
    os.unlink(path)
    os.rmdir(d)


async def test_connecting_to_a_host_server_on_loopback_fails(
    arena: Arena, tcp_server: Listener
) -> None:
    port = tcp_server.sock.getsockname()[1]
    v = await arena.value(f"attempt(socket.create_connection, ('127.0.0.1', {port}), timeout=1)")
    assert blocked(v)
    assert not tcp_server.connected.is_set()


async def test_http_to_a_host_server_on_loopback_fails(arena: Arena, tcp_server: Listener) -> None:
    port = tcp_server.sock.getsockname()[1]
    code = (
        "import urllib.request\n"
        f"attempt(urllib.request.urlopen, 'http://127.0.0.1:{port}/', timeout=1)"
    )
    assert blocked(await arena.value(code))
    assert not tcp_server.connected.is_set()


# What the sandbox answers when code tries to reach the network: no internet socket at all
# (seccomp) or no route (an empty network namespace). A timeout or a refusal would mean the
# packet left: that is what a machine without internet says, not what a sandbox says.
SANDBOX_ERRNOS = {errno.EAFNOSUPPORT, errno.ENETUNREACH, errno.EPERM, errno.EACCES}
ERRNO_OF = (
    "def errno_of(fn):\n"
    "    try:\n        fn()\n    except OSError as e:\n        return e.errno\n"
    "    return 0\n"
)


async def test_connecting_to_an_external_address_fails_at_the_sandbox(arena: Arena) -> None:
    code = ERRNO_OF + "errno_of(lambda: socket.create_connection(('1.1.1.1', 443), timeout=1))"
    assert await arena.value(code) in SANDBOX_ERRNOS


async def test_udp_to_a_public_resolver_fails_at_the_sandbox(arena: Arena) -> None:
    code = (
        ERRNO_OF
        + "errno_of(lambda: socket.socket(type=socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53)))"
    )
    assert await arena.value(code) in SANDBOX_ERRNOS


async def test_udp_to_a_host_listener_on_loopback_never_arrives(arena: Arena) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(1.0)
    try:
        port = sock.getsockname()[1]
        udp = "socket.socket(type=socket.SOCK_DGRAM)"
        code = ERRNO_OF + f"errno_of(lambda: {udp}.sendto(b'hello', ('127.0.0.1', {port})))"
        assert await arena.value(code) in SANDBOX_ERRNOS
        with pytest.raises(TimeoutError):
            sock.recvfrom(16)
    finally:
        sock.close()


async def test_dns_resolution_fails(arena: Arena) -> None:
    assert blocked(await arena.value("attempt(socket.getaddrinfo, 'example.com', 443)"))


async def test_localhost_by_name_fails(arena: Arena, tcp_server: Listener) -> None:
    port = tcp_server.sock.getsockname()[1]
    v = await arena.value(f"attempt(socket.create_connection, ('localhost', {port}), timeout=1)")
    assert blocked(v)
    assert not tcp_server.connected.is_set()


async def test_ipv6_loopback_fails_at_the_sandbox(arena: Arena) -> None:
    code = ERRNO_OF + "errno_of(lambda: socket.create_connection(('::1', 22), timeout=1))"
    assert await arena.value(code) in SANDBOX_ERRNOS


async def test_netlink_and_packet_sockets_cannot_be_opened(arena: Arena) -> None:
    code = (
        "[attempt(socket.socket, socket.AF_NETLINK, socket.SOCK_RAW, 0),"
        " attempt(socket.socket, socket.AF_PACKET, socket.SOCK_RAW, 0),"
        " attempt(socket.socket, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)]"
    )
    assert all(blocked(v) for v in await arena.value(code))  # type: ignore[attr-defined]


async def test_a_unix_socket_on_the_host_is_unreachable(
    arena: Arena, unix_server: tuple[Listener, str]
) -> None:
    listener, path = unix_server
    code = f"s = socket.socket(socket.AF_UNIX)\nattempt(s.connect, {path!r})"
    assert blocked(await arena.value(code))
    assert not listener.connected.is_set()


async def test_an_abstract_unix_socket_on_the_host_is_unreachable(arena: Arena) -> None:
    name = "\0codemode-canary-" + os.urandom(4).hex()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(name)
    listener = Listener(s)
    try:
        code = f"s = socket.socket(socket.AF_UNIX)\nattempt(s.connect, {name!r})"
        assert blocked(await arena.value(code))
        assert not listener.connected.is_set()
    finally:
        listener.close()


async def test_the_only_interface_is_an_isolated_loopback(arena: Arena) -> None:
    code = "[l.split(':')[0].strip() for l in read('/proc/self/net/dev').decode().splitlines()[2:]]"
    assert await arena.value(code) == ["lo"]
