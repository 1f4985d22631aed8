"""Client configuration: one frozen :class:`Config` for producers and consumers.

Durations are seconds (floats), as everywhere in trio; the protocol's
milliseconds appear only on the wire. Defaults follow go-nsq's ``NewConfig``
where the client-library guide leaves the value open.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field

from .. import __version__
from ..net.addresses import format_address, parse_address
from ..wire.identify import IdentifyRequest

__all__ = ["Config", "format_address", "parse_address"]


def _hostname() -> str:
    return socket.gethostname()


def _short_hostname() -> str:
    return socket.gethostname().split(".")[0]


@dataclass(frozen=True, kw_only=True)
class Config:
    """Settings shared by :class:`~nsqbox.client.Producer` and :class:`~nsqbox.client.Consumer`.

    Identity and feature negotiation (sent in IDENTIFY):

    - ``client_id``, ``hostname``, ``user_agent``: how nsqd and nsqadmin show this client.
    - ``heartbeat_interval``: seconds between nsqd's heartbeats; ``0`` disables them
      (nsqd then refuses SUB), ``None`` keeps nsqd's default (half its client timeout).
    - ``output_buffer_size`` (bytes) and ``output_buffer_timeout`` (seconds): nsqd's
      write buffering for this connection; ``None`` keeps nsqd's defaults.
    - ``sample_rate``: deliver only this percentage of the channel's messages (0 = all).
    - ``msg_timeout``: nsqd's in-flight timeout for messages sent to this client.
    - ``tls``: ``True`` (system trust store) or an :class:`ssl.SSLContext`; the
      connection upgrades when nsqd agrees, and fails when it does not.
    - ``snappy`` / ``deflate`` (+ ``deflate_level``): compression, at most one.
    - ``auth_secret``: sent with AUTH when nsqd's IDENTIFY reply says ``auth_required``.

    Consumer behaviour (the client-library guide's knobs):

    - ``max_in_flight``: the most messages in flight over all connections together.
    - ``max_attempts``: deliveries after which a message goes to the give-up callback
      and is finished (0 = never give up).
    - ``requeue_delay`` / ``max_requeue_delay``: REQ delay when the handler gives none:
      ``requeue_delay * attempts``, at most ``max_requeue_delay``.
    - ``backoff_multiplier`` / ``max_backoff_duration``: backoff lasts
      ``multiplier * 2**level`` seconds, at most the maximum; a maximum of 0 disables backoff.
    - ``lookupd_poll_interval`` / ``lookupd_poll_jitter`` / ``lookupd_poll_timeout``.
    - ``low_rdy_idle_timeout`` / ``low_rdy_timeout`` / ``rdy_redistribute_interval``:
      moving RDY between connections when ``max_in_flight`` < connections.
    - ``reconnect_delay`` / ``max_reconnect_delay``: exponential delays between
      reconnection attempts to nsqd addresses given directly.
    - ``handler_concurrency``: tasks running an ``async`` handler.
    - ``close_timeout``: how long a graceful close waits for CLOSE_WAIT and responses.
    """

    client_id: str = field(default_factory=_short_hostname)
    hostname: str = field(default_factory=_hostname)
    user_agent: str = f"nsqbox/{__version__}"
    heartbeat_interval: float | None = 30.0
    output_buffer_size: int | None = None
    output_buffer_timeout: float | None = None
    sample_rate: int = 0
    msg_timeout: float | None = None
    tls: bool | ssl.SSLContext = False
    tls_server_hostname: str | None = None
    snappy: bool = False
    deflate: bool = False
    deflate_level: int = 6
    auth_secret: str | bytes | None = None

    dial_timeout: float = 5.0
    read_timeout: float = 60.0
    write_timeout: float = 10.0

    max_in_flight: int = 1
    max_attempts: int = 5
    requeue_delay: float = 90.0
    max_requeue_delay: float = 900.0
    backoff_multiplier: float = 1.0
    max_backoff_duration: float = 120.0
    lookupd_poll_interval: float = 60.0
    lookupd_poll_jitter: float = 0.3
    lookupd_poll_timeout: float = 10.0
    low_rdy_idle_timeout: float = 10.0
    low_rdy_timeout: float = 30.0
    rdy_redistribute_interval: float = 5.0
    reconnect_delay: float = 8.0
    max_reconnect_delay: float = 120.0
    handler_concurrency: int = 1
    close_timeout: float = 30.0

    def __post_init__(self) -> None:
        checks = [
            (self.snappy and self.deflate, "cannot enable both snappy and deflate"),
            (not 1 <= self.deflate_level <= 9, "deflate_level must be in [1, 9]"),
            (not 0 <= self.sample_rate <= 99, "sample_rate must be in [0, 99]"),
            (self.max_in_flight < 0, "max_in_flight must be >= 0"),
            (not 0 <= self.max_attempts <= 65535, "max_attempts must be in [0, 65535]"),
            (not 0 <= self.lookupd_poll_jitter <= 1, "lookupd_poll_jitter must be in [0, 1]"),
            (self.lookupd_poll_interval <= 0, "lookupd_poll_interval must be > 0"),
            (self.rdy_redistribute_interval <= 0, "rdy_redistribute_interval must be > 0"),
            (self.handler_concurrency < 1, "handler_concurrency must be >= 1"),
            (self.reconnect_delay <= 0, "reconnect_delay must be > 0"),
            (self.max_reconnect_delay < self.reconnect_delay, "max_reconnect_delay too small"),
            (self.heartbeat_interval is not None and self.heartbeat_interval < 0, "bad heartbeat"),
        ]
        for failed, message in checks:
            if failed:
                raise ValueError(message)

    # -- derived values ---------------------------------------------------------
    @property
    def wants_tls(self) -> bool:
        """True when the connection should negotiate TLS."""
        return self.tls is not False

    def ssl_context(self) -> ssl.SSLContext:
        """The context for the TLS upgrade (a default, verifying context for ``tls=True``)."""
        if isinstance(self.tls, ssl.SSLContext):
            return self.tls
        return ssl.create_default_context()

    def identify_request(self) -> IdentifyRequest:
        """The IDENTIFY body; durations become the milliseconds nsqd expects, -1 disables."""
        return IdentifyRequest(
            client_id=self.client_id,
            hostname=self.hostname,
            user_agent=self.user_agent,
            feature_negotiation=True,
            heartbeat_interval=_ms_or_disabled(self.heartbeat_interval),
            output_buffer_size=self.output_buffer_size or 0,
            output_buffer_timeout=_ms_or_disabled(self.output_buffer_timeout),
            sample_rate=self.sample_rate,
            msg_timeout=round(self.msg_timeout * 1000) if self.msg_timeout else 0,
            tls_v1=self.wants_tls,
            snappy=self.snappy,
            deflate=self.deflate,
            deflate_level=self.deflate_level if self.deflate else 0,
        )

    def requeue_delay_for(self, attempts: int) -> float:
        """The guide's default REQ delay: grows with the attempts, capped."""
        return min(self.requeue_delay * attempts, self.max_requeue_delay)


def _ms_or_disabled(seconds: float | None) -> int:
    # IDENTIFY: 0 means "server default" and -1 means "off"; our None and 0 map onto them.
    if seconds is None:
        return 0
    if seconds == 0:
        return -1
    return round(seconds * 1000)
