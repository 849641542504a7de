"""Which addresses an HTTP tool may connect to, checked at connect time.

An HTTP tool runs on the host, called from the sandbox through the tool bridge: it must
not become the no-network sandbox's way into the host's network. So, whatever the URL
says, every connection is checked where it is made:

- the host name is resolved here, and **every** address it resolves to must be allowed
  (a name that resolves to one public and one private address is refused);
- the connection goes to the address that was checked, never to a second resolution of
  the name: DNS rebinding (public at check time, 127.0.0.1 at connect time) has no gap
  to use. TLS still verifies the certificate against the name;
- allowed means globally routable (``ipaddress``'s ``is_global``, which excludes
  loopback, private, link-local, shared/CGNAT, documentation, reserved...), not
  multicast, or inside a network the definition allow-lists. IPv4-mapped and 6to4/NAT64
  IPv6 forms are checked as the IPv4 address they carry. Cloud metadata addresses are
  refused unless allow-listed as themselves (``169.254.169.254/32``), even inside an
  allow-listed network.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence
from typing import Any

import anyio
import httpcore2

from ...errors import ToolError
from ...ipv4in6 import embedded_v4

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
"""Cloud instance metadata endpoints (AWS/GCP/Azure/OpenStack, ECS, Alibaba, AWS IPv6)."""


class AddressRefused(ToolError):
    """The tool's host resolves to an address it may not reach."""


class AddressPolicy:
    """Public addresses, plus the networks a definition allow-lists."""

    def __init__(self, allow: Iterable[str] = ()) -> None:
        self.allow: list[IPNetwork] = [ipaddress.ip_network(n, strict=False) for n in allow]

    def why_refused(self, address: str) -> str | None:
        """None when ``address`` may be reached, else the reason."""
        try:
            ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return f"{address!r} is not an IP address"
        ip = embedded_v4(ip) or ip
        if ip in METADATA:
            exact = any(net.num_addresses == 1 and ip in net for net in self.allow)
            return None if exact else f"{ip} is a cloud metadata address"
        if any(ip in net for net in self.allow):
            return None
        if ip.is_multicast or not ip.is_global:
            return f"{ip} is not a public address (loopback, private, link-local or reserved)"
        return None

    def check_all(self, host: str, addresses: Sequence[str]) -> None:
        if not addresses:
            raise AddressRefused(f"{host} resolves to no address")
        for a in addresses:
            why = self.why_refused(a)
            if why is not None:
                hint = " and the definition does not allow-list it (http.allow_networks)"
                raise AddressRefused(f"refused to connect to {host}: {why}{hint}")


async def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (an IP literal resolves to itself)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return [host.strip("[]")]
    except ValueError:
        pass
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ToolError(f"cannot resolve {host}: {exc}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network backend, resolving and checking every address it connects to."""

    def __init__(self, policy: AddressPolicy) -> None:
        self.policy = policy
        self._inner = httpcore2.AnyIOBackend()
        self._resolve = resolve

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        addresses = await self._resolve(host, port)
        self.policy.check_all(host, addresses)
        error: Exception | None = None
        for address in addresses:  # each one checked above; never resolved again
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore2.ConnectError as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise AddressRefused("HTTP tools do not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


__all__ = ["METADATA", "AddressPolicy", "AddressRefused", "GuardedBackend", "resolve"]
