"""The plugin's options (ini keys and command-line flags) and the values it hands out.

This module is imported when pytest loads the plugin, so it imports nothing heavy:
no trio, no server code, no HTTP client.
"""

from __future__ import annotations

import enum
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .options import OPTIONS, Option

__all__ = [
    "Address",
    "AddressView",
    "BoxAddresses",
    "BoxConfig",
    "BoxStartError",
    "Cleanup",
    "ClusterSpec",
    "Mode",
    "SeedPath",
    "SpecError",
    "split_args",
]


#: A seed file's path (docs/state.md, "Seeds"): what ``seed=`` of the factories takes.
SeedPath = str | os.PathLike[str]


class SpecError(ValueError):
    """Flags or options for the servers that the daemons would refuse."""


class BoxStartError(RuntimeError):
    """Servers did not start (the message says why, with a child process's output)."""


class Mode(enum.Enum):
    """Where the session's servers run."""

    #: nsqd and nsqlookupd on their own trio loop in a thread of the test process.
    THREAD = "thread"
    #: ``python -m nsqbox up`` and ``python -m nsqbox lookupd`` child processes.
    SUBPROCESS = "subprocess"
    #: Servers someone else runs (real NSQ in CI, say); only their TCP and HTTP APIs are used.
    NOPROC = "noproc"


class Cleanup(enum.Enum):
    """What the function-scoped handle does to the servers after each test."""

    #: Delete every topic (and so every channel and message); forget them in nsqlookupd.
    DELETE = "delete"
    #: Keep topics and channels, drop their messages.
    EMPTY = "empty"
    #: Leave everything as the test left it.
    NONE = "none"


class Address(str):
    """A ``host:port`` string (what NSQ clients take) with its other spellings.

    >>> a = Address("127.0.0.1:4161")
    >>> a.host, a.port, a.url
    ('127.0.0.1', 4161, 'http://127.0.0.1:4161')
    """

    __slots__ = ()

    @classmethod
    def of(cls, host: str, port: int) -> Address:
        """The address of ``host`` and ``port`` (IPv6 hosts in brackets)."""
        return cls(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")

    @property
    def host(self) -> str:
        """The host part, without IPv6 brackets."""
        host = self.rpartition(":")[0]
        return host[1:-1] if host.startswith("[") else host

    @property
    def port(self) -> int:
        """The port number."""
        return int(self.rpartition(":")[2])

    @property
    def pair(self) -> tuple[str, int]:
        """``(host, port)``, as ``socket.create_connection`` takes it."""
        return self.host, self.port

    @property
    def url(self) -> str:
        """``http://host:port`` (for HTTP APIs and clients that want a URL)."""
        return f"http://{self}"


@dataclass(frozen=True)
class BoxAddresses:
    """Where a box's servers listen: one entry per node, in start order."""

    nsqd_tcp: tuple[Address, ...]
    nsqd_http: tuple[Address, ...]
    lookupd_tcp: tuple[Address, ...] = ()
    lookupd_http: tuple[Address, ...] = ()


class AddressView:
    """The address properties every handle and box offers (from its ``addresses``).

    The same names on the ``nsqbox`` handle, the session box (``nsqbox_proc``,
    ``nsqbox_noproc``), factory handles and the trio handle.
    """

    addresses: BoxAddresses

    @property
    def nsqd_tcp_address(self) -> Address:
        """The (first) nsqd's TCP address, ``host:port`` (``.host``, ``.port``, ``.pair``)."""
        return self.addresses.nsqd_tcp[0]

    @property
    def nsqd_http_address(self) -> Address:
        """The (first) nsqd's HTTP address, ``host:port`` (``.url`` for ``http://...``)."""
        return self.addresses.nsqd_http[0]

    @property
    def lookupd_tcp_address(self) -> Address | None:
        """The (first) nsqlookupd's TCP address (what nsqd registers with), if any."""
        return self.addresses.lookupd_tcp[0] if self.addresses.lookupd_tcp else None

    @property
    def lookupd_http_address(self) -> Address | None:
        """The (first) nsqlookupd's HTTP address (what consumers query), if any."""
        return self.addresses.lookupd_http[0] if self.addresses.lookupd_http else None

    @property
    def nsqd_tcp_addresses(self) -> list[Address]:
        """Every nsqd's TCP address."""
        return list(self.addresses.nsqd_tcp)

    @property
    def nsqd_http_addresses(self) -> list[Address]:
        """Every nsqd's HTTP address."""
        return list(self.addresses.nsqd_http)

    @property
    def lookupd_tcp_addresses(self) -> list[Address]:
        """Every nsqlookupd's TCP address."""
        return list(self.addresses.lookupd_tcp)

    @property
    def lookupd_http_addresses(self) -> list[Address]:
        """Every nsqlookupd's HTTP address."""
        return list(self.addresses.lookupd_http)


@dataclass(frozen=True)
class ClusterSpec:
    """What to start: how many nsqd and nsqlookupd, and their options.

    ``nsqd_args``/``lookupd_args`` are command-line flags as the real daemons take
    them (``--msg-timeout=5s``); ``nsqd_options`` are
    :class:`~nsqbox.nsqd.domain.options.NSQDOptions`
    fields (``msg_timeout=5.0``), applied after the flags. Every nsqd registers with
    every nsqlookupd.
    """

    nsqd: int = 1
    lookupd: int = 1
    nsqd_args: tuple[str, ...] = ()
    lookupd_args: tuple[str, ...] = ()
    nsqd_options: Mapping[str, Any] = field(default_factory=dict)
    #: The box's broker clock: ``"real"`` or ``"manual"`` (docs/testing.md, "Testing time").
    clock: str = "real"

    def __post_init__(self) -> None:
        if self.clock not in ("real", "manual"):
            raise ValueError(f"clock must be 'real' or 'manual' (got {self.clock!r})")
        if self.nsqd < 1:
            raise ValueError(f"a box needs at least one nsqd (got nsqd={self.nsqd})")
        if self.lookupd < 0:
            raise ValueError(f"lookupd must be >= 0 (got {self.lookupd})")


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise ValueError(f"must be > 0, got {text}")
    return value


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise ValueError(f"must be >= {minimum}, got {text}")
        return value

    return parse


def _addresses(text: str) -> tuple[Address, ...]:
    return tuple(Address(a.strip()) for a in text.split(",") if a.strip())


def _args(text: str) -> tuple[str, ...]:
    return tuple(shlex.split(text))


#: How each option's text becomes a BoxConfig value (by option name).
_PARSERS: dict[str, Callable[[str], Any]] = {
    "mode": Mode,
    "nsqd_count": _count(1),
    "lookupd_count": _count(0),
    "nsqd_args": _args,
    "lookupd_args": _args,
    "start_timeout": _positive_float,
    "timeout": _positive_float,
    "cleanup": Cleanup,
    "python": str,
    "data_path": str,
    "clock": str,
    "seed": str,
    "nsqd_tcp_address": _addresses,
    "nsqd_http_address": _addresses,
    "lookupd_tcp_address": _addresses,
    "lookupd_http_address": _addresses,
}


@dataclass(frozen=True)
class BoxConfig:
    """The plugin's settings, resolved from flags, ini keys and defaults (in that order)."""

    mode: Mode = Mode.THREAD
    nsqd_count: int = 1
    lookupd_count: int = 1
    nsqd_args: tuple[str, ...] = ()
    lookupd_args: tuple[str, ...] = ()
    start_timeout: float = 10.0
    timeout: float = 10.0
    cleanup: Cleanup = Cleanup.DELETE
    python: str = ""
    data_path: str = "auto"
    clock: str = "real"
    #: A seed file applied to the session box as it starts (docs/state.md, "Seeds").
    seed: str = ""
    nsqd_tcp_address: tuple[Address, ...] = (Address("127.0.0.1:4150"),)
    nsqd_http_address: tuple[Address, ...] = (Address("127.0.0.1:4151"),)
    lookupd_tcp_address: tuple[Address, ...] = (Address("127.0.0.1:4160"),)
    lookupd_http_address: tuple[Address, ...] = (Address("127.0.0.1:4161"),)

    @classmethod
    def resolve(cls, lookup: Callable[[Option], str | None]) -> BoxConfig:
        """Build from ``lookup(option)``: the raw text for an option, or None for its default.

        Raises ValueError naming the option when a value does not parse.
        """
        values: dict[str, Any] = {}
        for opt in OPTIONS:
            raw = lookup(opt)
            text = (opt.default if raw is None else raw).strip()
            if opt.choices and text not in opt.choices:
                raise ValueError(f"{opt.ini}/{opt.flag}: {text!r} is not one of {opt.choices}")
            try:
                values[opt.name] = _PARSERS[opt.name](text)
            except ValueError as exc:
                raise ValueError(f"{opt.ini}/{opt.flag}: {exc}") from None
        return cls(**values)

    @property
    def interpreter(self) -> str:
        """The Python that runs subprocess-mode servers."""
        return self.python or sys.executable

    def spec(self) -> ClusterSpec:
        """The session box's cluster."""
        return ClusterSpec(
            nsqd=self.nsqd_count,
            lookupd=self.lookupd_count,
            nsqd_args=self.nsqd_args,
            lookupd_args=self.lookupd_args,
            clock=self.clock,
        )

    def noproc_addresses(self) -> BoxAddresses:
        """The servers noproc mode uses; ValueError when the nsqd lists do not pair up."""
        if len(self.nsqd_tcp_address) != len(self.nsqd_http_address):
            raise ValueError(
                "nsqbox_nsqd_tcp_address and nsqbox_nsqd_http_address must list the same nsqds "
                f"(got {len(self.nsqd_tcp_address)} and {len(self.nsqd_http_address)})"
            )
        if not self.nsqd_tcp_address:
            raise ValueError("noproc mode needs at least one nsqd address")
        return BoxAddresses(
            nsqd_tcp=self.nsqd_tcp_address,
            nsqd_http=self.nsqd_http_address,
            lookupd_tcp=self.lookupd_tcp_address,
            lookupd_http=self.lookupd_http_address,
        )


def split_args(args: str | Sequence[str]) -> tuple[str, ...]:
    """Flags given as one shell-quoted string or as a sequence."""
    return tuple(shlex.split(args)) if isinstance(args, str) else tuple(args)
