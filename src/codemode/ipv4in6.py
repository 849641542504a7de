"""The IPv4 address an IPv6 address stands for, in every form that routes to one.

One reading for the two places that must agree on it: the declared tools' address check
(``codemode.tools.declared.netguard``: what a connection may reach) and the policy's
lenient reading of URLs (``codemode.invisible``: what a rule on ``169.254.169.254``
covers). Were they to differ, ``http://[2002:a9fe:a9fe::]/`` would be refused by one and
missed by the other.
"""

from __future__ import annotations

import ipaddress

__all__ = ["embedded_v4"]

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def embedded_v4(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address ``ip`` carries, or None: IPv4-mapped (``::ffff:a.b.c.d``), 6to4
    (``2002:AABB:CCDD::``), NAT64 (``64:ff9b::a.b.c.d``) and the deprecated IPv4-compatible
    form (``::a.b.c.d``; ``::`` and ``::1`` are IPv6's own)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if int(ip) >> 32 == 0 and int(ip) > 1:
        return ipaddress.IPv4Address(int(ip))
    return None
