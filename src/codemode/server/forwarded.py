"""Who a request comes from behind a reverse proxy: only proxies named by the operator
are believed.

``--client-share`` and the per-address connection cap count clients by address; behind a
proxy every client has the proxy's. The proxy says who it forwards in ``X-Forwarded-For``
(or RFC 7239 ``Forwarded``), but any client can write that header too: honoured from
anyone, a client picks a new identity per request and no share holds. So:

- nothing is believed unless ``--forwarded-allow-ips`` names the proxies (addresses or
  networks; none by default). uvicorn's own proxy handling, which trusts ``127.0.0.1``
  by default (and ``$FORWARDED_ALLOW_IPS``), is switched off: this is the one reading;
- only the header the proxy writes is read (``--forwarded-header``; a proxy appends to
  ``X-Forwarded-For`` but passes a client's ``Forwarded`` through untouched);
- the list is read from the right, the end the nearest proxy wrote: the client is the
  first address that is not itself a trusted proxy. What a client wrote to the left of
  its own address is never reached.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from typing import Literal

__all__ = ["HEADERS", "TrustedProxies"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
HeaderName = Literal["x-forwarded-for", "forwarded"]
HEADERS: tuple[HeaderName, ...] = ("x-forwarded-for", "forwarded")
_FOR = re.compile(r'(?:^|;)\s*for\s*=\s*("(?:[^"\\]|\\.)*"|[^;,\s]*)', re.IGNORECASE)
MAX_HOPS = 32
"""Entries of a forwarded list looked at, from the right: a longer chain is cut there."""


class TrustedProxies:
    """The proxies whose forwarded header names the client."""

    def __init__(self, spec: str | Iterable[str], header: HeaderName = "x-forwarded-for") -> None:
        items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
        self.networks: list[Network] = []
        for item in filter(None, items):
            if item == "*":
                raise ValueError(
                    "--forwarded-allow-ips '*' would believe every client's own "
                    "X-Forwarded-For (each could pick a new identity per request): name "
                    "the proxies' addresses or networks"
                )
            try:
                self.networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
            except ValueError:
                raise ValueError(
                    f"--forwarded-allow-ips: {item!r} is not an IP address or network "
                    "(e.g. 10.0.0.5, 10.0.0.0/8, ::1)"
                ) from None
        if header not in HEADERS:
            raise ValueError(f"--forwarded-header: expected one of {', '.join(HEADERS)}")
        self.header = header.encode()

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, host: str | None) -> bool:
        address = _address(host)
        return address is not None and any(address in n for n in self.networks)

    def client(self, peer: str | None, headers: Sequence[tuple[bytes, bytes]]) -> str | None:
        """The client's address: ``peer`` itself unless it is a trusted proxy; then the
        first untrusted address of the forwarded list, read from the right (the leftmost
        one when every hop is trusted; ``peer`` when the list is missing or empty)."""
        if not self.networks or not self.trusts(peer):
            return peer
        raw = ",".join(v.decode("latin-1") for k, v in headers if k.lower() == self.header)
        hops = _hops(raw, self.header == b"forwarded")[-MAX_HOPS:]
        if not hops:
            return peer
        for hop in reversed(hops):
            if not self.trusts(hop):
                return hop
        return hops[0]


def _hops(raw: str, rfc7239: bool) -> list[str]:
    if not rfc7239:
        return [h for h in (_host(p.strip()) for p in raw.split(",")) if h]
    out = []
    for element in raw.split(","):
        found = _FOR.search(element)
        if found:
            host = _host(found.group(1).strip('"').replace('\\"', '"'))
            if host:
                out.append(host)
    return out


def _host(value: str) -> str:
    """An address without its port or brackets; an opaque name (``unknown``, ``_hidden``)
    as it is: it still tells clients apart, it is just never a trusted proxy."""
    value = value.strip()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:  # IPv4:port
        return value.split(":", 1)[0]
    return value


def _address(host: str | None) -> Address | None:
    if not host:
        return None
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address
