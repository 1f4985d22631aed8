"""Whether a listener is reachable from other machines, and the warning that says so.

nsqbox binds 127.0.0.1 unless told otherwise. A listener on any other address (a
wildcard ``0.0.0.0`` or ``::`` above all) lets other machines reach it: NSQ's own
routes answer them as real nsqd's do, with no Host, Origin or secret checked. The
box says so once per listener as it starts, naming the addresses other machines
would use (:func:`exposure_warning`); for a wildcard bind those are the addresses of
this machine's interfaces (:func:`interface_addresses`, Linux; elsewhere the warning
names the wildcard only).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import socket
import struct
from pathlib import Path
from typing import Final

__all__ = ["exposure_warning", "interface_addresses", "is_exposed", "reach"]

#: Linux's SIOCGIFADDR: an interface's IPv4 address.
_SIOCGIFADDR: Final = 0x8915
#: Most interface addresses a warning names (a host with hundreds of veths says "...").
MAX_NAMED: Final = 8


def is_exposed(host: str) -> bool:
    """Whether a listener bound on ``host`` can be reached from another machine."""
    try:
        return not ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return host not in ("localhost",)  # a name: whatever it resolved to


def _ipv4_of(name: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(
                sock.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15])
            )
        except OSError:
            return None  # no IPv4 address (or down)
    return socket.inet_ntoa(packed[20:24])


def _ipv6_addresses() -> list[str]:
    """Global IPv6 addresses, from /proc/net/if_inet6 (``addr index prefix scope flags name``)."""
    try:
        lines = Path("/proc/net/if_inet6").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 4 and len(fields[0]) == 32 and fields[3] == "00":  # scope global
            with contextlib.suppress(ValueError):
                found.append(str(ipaddress.IPv6Address(bytes.fromhex(fields[0]))))
    return found


def interface_addresses(family: int = socket.AF_INET) -> list[str]:
    """This machine's non-loopback addresses of ``family`` (empty where it cannot tell)."""
    if family == socket.AF_INET6:
        found = _ipv6_addresses()
    else:
        try:
            names = [name for _, name in socket.if_nameindex()]
        except OSError:
            return []
        found = [a for a in map(_ipv4_of, names) if a is not None]
    return [a for a in dict.fromkeys(found) if not ipaddress.ip_address(a).is_loopback]


def _at(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def reach(host: str, port: int) -> str | None:
    """Where other machines reach a listener bound on ``host:port``: ``"192.0.2.7:4171"``,
    or for a wildcard ``"0.0.0.0:4150, every interface (192.0.2.7:4150, ...)"``; None on
    loopback."""
    if not is_exposed(host):
        return None
    where = _at(host, port)
    if host in ("0.0.0.0", "::"):
        family = socket.AF_INET6 if host == "::" else socket.AF_INET
        if host == "::":  # a dual-stack wildcard takes IPv4 too
            addresses = [*interface_addresses(socket.AF_INET), *interface_addresses(family)]
        else:
            addresses = interface_addresses(family)
        named = ", ".join(_at(a, port) for a in addresses[:MAX_NAMED])
        if len(addresses) > MAX_NAMED:
            named += ", ..."
        where = f"{where}, every interface" + (f" ({named})" if named else "")
    return where


def exposure_warning(name: str, host: str, port: int) -> str | None:
    """The warning for listener ``name`` bound on ``host:port``; None on loopback."""
    where = reach(host, port)
    if where is None:
        return None
    return (
        f"{name} listens on {where}: other machines can reach it. NSQ's own routes answer "
        "them as real NSQ's do (no Host, Origin or secret checked); nsqbox's own routes "
        "refuse a foreign Origin and a Host that is not an IP literal or an allowed name "
        "(--allowed-host names more), so by IP address they are open to the network"
    )
