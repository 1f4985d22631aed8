"""Network addresses as NSQ writes them: ``host:port``, IPv6 hosts in brackets.

Plumbing shared by the servers, the client, the tools and the command line;
no trio here, so the command line can format an address without loading it.
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = [
    "broadcast_address",
    "dialable",
    "format_address",
    "is_loopback",
    "parse_address",
    "split_host_port",
]


def parse_address(address: str | tuple[str, int]) -> tuple[str, int]:
    """``"host:port"``, ``"[::1]:4150"`` or a ``(host, port)`` tuple, as ``(host, port)``."""
    if isinstance(address, tuple):
        return address[0], int(address[1])
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"address must be host:port, not {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def format_address(address: str | tuple[str, int]) -> str:
    """The canonical ``host:port`` key for an address (IPv6 hosts in brackets)."""
    host, port = parse_address(address)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def dialable(address: str) -> str:
    """``host:port`` a local client can dial: a wildcard host becomes loopback."""
    host, _, port = address.rpartition(":")
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host in ("[::]", "::"):
        host = "[::1]"
    return f"{host}:{port}"


def split_host_port(address: str) -> tuple[str, int]:
    """Split ``host:port`` (``[v6]:port`` too) the way Go's net.SplitHostPort does."""
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"address {address}: missing port in address")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return host, int(port)
    except ValueError:
        raise ValueError(f"address {address}: invalid port") from None


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def broadcast_address(given: str, bind_address: str) -> str:
    """The address a server announces: ``given`` if set, else a loopback bind host, else the
    hostname.

    nsqd and nsqlookupd default to the hostname; nsqbox keeps a loopback-only server's
    announcement on loopback, so discovery never points a client off the box by accident.
    """
    if given:
        return given
    host, _ = split_host_port(bind_address)
    if is_loopback(host):
        return host
    return socket.gethostname()
