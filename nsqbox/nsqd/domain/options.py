"""nsqd's options, with real nsqd's names and defaults.

Durations are held in seconds (floats) because trio speaks seconds; the Go-ns
integers that /info and friends report are derived from them. Field names are
nsqd's flag names with ``-`` turned into ``_`` (the same key a TOML config uses).
"""

from __future__ import annotations

import hashlib
import socket
import zlib
from dataclasses import dataclass, field

from ...net.addresses import broadcast_address

# --tls-required values, as nsqd's TLSNotRequired / TLSRequiredExceptHTTP / TLSRequired.
TLS_NOT_REQUIRED = 0
TLS_REQUIRED_EXCEPT_HTTP = 1
TLS_REQUIRED = 2
#: The largest ``--journal-size`` (events): its ring and reads stay within reason.
MAX_JOURNAL_SIZE = 10_000_000


def default_node_id(hostname: str | None = None) -> int:
    """nsqd's default --node-id: crc32(md5(hostname)) % 1024."""
    name = socket.gethostname() if hostname is None else hostname
    return zlib.crc32(hashlib.md5(name.encode()).digest()) % 1024


@dataclass(slots=True)
class NSQDOptions:
    """Every nsqd option. Defaults are real nsqd v1.3.0's, except the bind host.

    nsqbox binds 127.0.0.1 by default (a development tool must not listen on
    every interface unless told to).
    """

    node_id: int = field(default_factory=default_node_id)
    log_level: str = "info"
    log_prefix: str = "[nsqd] "

    tcp_address: str = "127.0.0.1:4150"
    http_address: str = "127.0.0.1:4151"
    https_address: str = "127.0.0.1:4152"
    broadcast_address: str = ""  # "" -> derived, see effective_broadcast_address()
    broadcast_tcp_port: int = 0
    broadcast_http_port: int = 0
    lookupd_tcp_addresses: list[str] = field(default_factory=list)
    # Set by PUT /config/nsqlookupd_tcp_addresses with ``null``: nsqd then holds
    # a nil slice, which GET shows as ``null`` (the list above stays empty).
    lookupd_tcp_addresses_null: bool = False
    auth_http_addresses: list[str] = field(default_factory=list)
    auth_http_request_method: str = "get"
    #: nsqbox's: names a request's Host may give beside IP literals, localhost, the hostname
    #: and the broadcast address; with any, NSQ's own HTTP routes check Host and Origin too.
    allowed_hosts: list[str] = field(default_factory=list)
    http_client_connect_timeout: float = 2.0
    http_client_request_timeout: float = 5.0

    data_path: str = ""  # "" -> the current directory
    mem_queue_size: int = 10000
    max_bytes_per_file: int = 100 * 1024 * 1024
    sync_every: int = 2500
    sync_timeout: float = 2.0

    queue_scan_interval: float = 0.1
    queue_scan_refresh_interval: float = 5.0
    queue_scan_selection_count: int = 20
    queue_scan_worker_pool_max: int = 4
    queue_scan_dirty_percent: float = 0.25

    msg_timeout: float = 60.0
    max_msg_timeout: float = 15 * 60.0
    max_msg_size: int = 1024 * 1024
    max_body_size: int = 5 * 1024 * 1024
    max_req_timeout: float = 3600.0
    client_timeout: float = 60.0

    max_heartbeat_interval: float = 60.0
    max_rdy_count: int = 2500
    max_output_buffer_size: int = 64 * 1024
    max_output_buffer_timeout: float = 30.0
    min_output_buffer_timeout: float = 0.025
    output_buffer_timeout: float = 0.25
    max_channel_consumers: int = 0

    statsd_address: str = ""
    statsd_prefix: str = "nsq.%s"
    statsd_interval: float = 60.0
    statsd_mem_stats: bool = True
    statsd_udp_packet_size: int = 508
    statsd_exclude_ephemeral: bool = False

    e2e_processing_latency_window_time: float = 600.0
    e2e_processing_latency_percentiles: list[float] = field(default_factory=list)

    tls_cert: str = ""
    tls_key: str = ""
    tls_client_auth_policy: str = ""
    tls_root_ca_file: str = ""
    tls_required: int = TLS_NOT_REQUIRED
    tls_min_version: str = "tls1.0"
    #: How long a client's TLS handshake may take (nsqd's fixed 5s ``SetDeadline`` in
    #: UpgradeTLS). Not a flag, as in nsqd; tests shorten it.
    tls_handshake_timeout: float = 5.0  # nsqd's fixed tlsConn.SetDeadline in UpgradeTLS

    #: nsqbox's: the journal's bound in events (0: no journal), issue #33.
    journal_size: int = 100_000

    deflate: bool = True
    max_deflate_level: int = 6
    snappy: bool = True

    def effective_broadcast_address(self) -> str:
        """What lookupd is told: the flag, else the bind host when it is loopback, else hostname.

        Discovery then never points a client off the box by accident.
        """
        return broadcast_address(self.broadcast_address, self.tcp_address)

    def validate(self) -> None:
        """Raise ValueError with nsqd's message for options nsqd refuses at start."""
        if not 1 <= self.max_deflate_level <= 9:
            raise ValueError("--max-deflate-level must be [1,9]")
        if not 0 <= self.journal_size <= MAX_JOURNAL_SIZE:
            raise ValueError(f"--journal-size must be [0,{MAX_JOURNAL_SIZE}]")
        if not 0 <= self.node_id < 1024:
            raise ValueError("--node-id must be [0,1024)")
        for p in self.e2e_processing_latency_percentiles:
            if p <= 0 or p > 1:
                raise ValueError(f"invalid E2E processing latency percentile: {p:g}")
