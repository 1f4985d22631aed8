"""Who may drive the box from a browser: a Host allowlist and a same-origin check.

nsqbox runs beside the developer's browser. A web page the developer visits can
send simple cross-site requests (a body-less POST needs no CORS preflight), and
with DNS rebinding a page on ``evil.example`` can make its own name resolve to
127.0.0.1 and read the answers. Two checks stop both, as Vite and Jupyter do:

* **Host allowlist** (against DNS rebinding): the request's ``Host`` must name an
  IP literal, ``localhost`` or a ``*.localhost`` name, this machine's hostname,
  the box's ``--broadcast-address``, or a name given with ``--allowed-host``. A
  rebound page's requests carry its own name, which is on none of these.
* **Foreign Origin** (against cross-site requests): a request whose ``Origin``
  header is present must come from the same origin as the one it asked
  (``scheme://host:port`` whose ``host:port`` is the request's ``Host``), and that
  host must pass the allowlist. ``Origin: null`` (sandboxed frames, files) is
  foreign. NSQ clients, curl and tests send no Origin and are never refused.

The guard is pure (no I/O, no trio): each service builds one from its options and
asks it about each request that reaches an nsqbox-only route.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Iterable

import msgspec

__all__ = ["LocalGuard", "host_name", "local_guard"]

#: What a refused request is answered (403), as a JSON error ``{"message": ...}``.
HOST_REFUSED = "HOST_NOT_ALLOWED"
ORIGIN_REFUSED = "ORIGIN_NOT_ALLOWED"


def host_name(host: str) -> str:
    """The name part of a ``Host`` header or ``host:port`` (IPv6 brackets kept), lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end >= 0 else host
    name, _, _port = host.partition(":")
    return name.rstrip(".")


def _is_ip_literal(name: str) -> bool:
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class LocalGuard(msgspec.Struct, frozen=True):
    """The Host allowlist and Origin rule of one service.

    ``names`` are the allowed host names beyond IP literals and ``localhost``.
    ``guard_nsq_routes`` is True once ``--allowed-host`` was given: NSQ's own nsqd
    and lookupd routes then check Host too (by default they answer any Host, as
    real nsqd does, so apps that reach the box by a container name keep working).
    It is True for the admin service too, every route of which is guarded.
    """

    names: frozenset[str] = frozenset()
    guard_nsq_routes: bool = False

    def host_allowed(self, host: str | None) -> bool:
        """Whether a request with this ``Host`` header (None when absent) may be answered."""
        if host is None:  # HTTP/1.0 without Host: no name a rebinding page could set
            return True
        name = host_name(host)
        if not name:
            return False
        if name == "localhost" or name.endswith(".localhost"):
            return True
        return _is_ip_literal(name) or name in self.names

    def origin_allowed(self, origin: str | None, host: str | None) -> bool:
        """Whether a request's ``Origin`` (None when absent) is this server's own."""
        if origin is None:
            return True
        scheme, sep, rest = origin.strip().lower().partition("://")
        if not sep or scheme not in ("http", "https") or host is None:
            return False  # "null", a file, an extension: foreign
        netloc = rest.split("/", 1)[0]
        if "@" in netloc:
            return False
        return netloc == host.strip().lower() and self.host_allowed(netloc)

    def refusal(self, host: str | None, origin: str | None) -> str | None:
        """The error code to answer 403 with, or None when the request may go on.

        Decisions on short headers are remembered (:func:`_remembered_refusal`): a
        client sends the same Host and Origin on every request.
        """
        if len(host or "") + len(origin or "") <= _REMEMBERED_LENGTH:
            return _remembered_refusal(self, host, origin)
        return self.decide(host, origin)

    def decide(self, host: str | None, origin: str | None) -> str | None:
        """:meth:`refusal`, worked out afresh."""
        if not self.host_allowed(host):
            return HOST_REFUSED
        if not self.origin_allowed(origin, host):
            return ORIGIN_REFUSED
        return None


#: Longest Host plus Origin whose decision is remembered (a peer cannot fill memory).
_REMEMBERED_LENGTH = 256


@functools.lru_cache(maxsize=1024)
def _remembered_refusal(guard: LocalGuard, host: str | None, origin: str | None) -> str | None:
    """``guard.decide(host, origin)``, remembered for the last 1,024 guards and headers."""
    return guard.decide(host, origin)


def local_guard(
    allowed_hosts: Iterable[str] = (),
    broadcast_address: str | None = None,
    *,
    every_route: bool = False,
) -> LocalGuard:
    """The guard for a service: this machine's hostname, ``broadcast_address`` and
    ``allowed_hosts`` (``--allowed-host``, repeatable) beside IP literals and localhost.

    ``every_route`` guards NSQ's own routes too even without ``allowed_hosts``
    (the admin service: none of its routes is one an NSQ client needs by another name).
    """
    extra = [host_name(h) for h in allowed_hosts if h.strip()]
    names = {socket.gethostname().lower(), *extra}
    if broadcast_address:
        names.add(host_name(broadcast_address))
    names.discard("")
    return LocalGuard(frozenset(names), guard_nsq_routes=every_route or bool(extra))
