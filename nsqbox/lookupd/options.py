"""nsqlookupd's options, with real nsqlookupd's names and defaults (apps/nsqlookupd).

Durations are seconds (floats), as trio speaks them. Field names are the flag
names with ``-`` turned into ``_`` (the keys a TOML config file uses). The command line
and ``--config`` are :mod:`nsqbox.lookupd.config`'s (loaded only where one is parsed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..net.addresses import broadcast_address

__all__ = ["LookupdOptions"]


@dataclass(slots=True)
class LookupdOptions:
    """Every nsqlookupd option. Defaults are nsqlookupd v1.3.0's, except the bind host.

    nsqbox binds 127.0.0.1 by default: a development tool must not listen on
    every interface unless told to.
    """

    log_level: str = "info"
    log_prefix: str = "[nsqlookupd] "
    tcp_address: str = "127.0.0.1:4160"
    http_address: str = "127.0.0.1:4161"
    broadcast_address: str = ""  # "" -> derived, see effective_broadcast_address()
    inactive_producer_timeout: float = 300.0
    tombstone_lifetime: float = 45.0
    #: nsqbox's: Host names allowed beside IP literals, localhost and the hostname (and,
    #: with any, asked of NSQ's own routes too); see :mod:`nsqbox.http.local_guard`.
    allowed_hosts: list[str] = field(default_factory=list)
    #: nsqbox's: with any (the box's nsqd auth), nsqbox's own routes are off.
    auth_http_addresses: list[str] = field(default_factory=list)
    #: Set by the box (no flag): its nsqds' ``--broadcast-address``, a Host it answers to.
    box_broadcast_address: str = ""

    def effective_broadcast_address(self) -> str:
        """What IDENTIFY replies carry: the flag, else a loopback bind host, else the hostname.

        nsqd builds the lookupd HTTP address it asks for channels from this, so
        on a loopback-only box it must not be a hostname that resolves elsewhere.
        """
        return broadcast_address(self.broadcast_address, self.tcp_address)
