"""The ``nsq`` data source's options, parsed once into frozen, picklable values.

Spark hands a data source its options as a case-insensitive mapping of strings
(``.option("maxMessagesPerBatch", 500)`` arrives as ``"500"``). This module
turns that mapping into :class:`ReadOptions` and :class:`WriteOptions` and
rejects what it does not understand up front, on the driver, instead of in a
task on an executor. It does not import pyspark, so it is tested on its own.

Durations are Go durations (``"1s"``, ``"1500ms"``, ``"2m"``), as nsqd's own
flags; a bare number is milliseconds, as in IDENTIFY.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..client.config import Config, format_address
from ..go.syntax import parse_duration
from ..wire.names import is_valid_channel_name, is_valid_topic_name

__all__ = [
    "ConnectionOptions",
    "OptionError",
    "ReadOptions",
    "WriteOptions",
    "parse_read_options",
    "parse_write_options",
]

Compression = Literal["none", "snappy", "deflate"]
StreamReaderKind = Literal["simple", "partitioned"]

#: Every option the source understands, lower-cased (Spark matches option names
#: case-insensitively).
_CONNECTION_KEYS = {
    "nsqd",
    "nsqdhttp",
    "lookupd",
    "tls",
    "tlscafile",
    "tlscertfile",
    "tlskeyfile",
    "tlsverify",
    "tlsservername",
    "authsecret",
    "compression",
    "deflatelevel",
    "clientid",
    "heartbeatinterval",
    "dialtimeout",
}
_READ_KEYS = {
    "topic",
    "channel",
    "maxmessagesperbatch",
    "maxmessagespertrigger",
    "minmessagespertrigger",
    "maxtriggerdelay",
    "msgtimeout",
    "polltimeout",
    "maxmessages",
    "idletimeout",
    "lookupdpollinterval",
    "reader",
    "walpath",
    "partitionspernode",
}
_WRITE_KEYS = {"topic", "batchsize", "batchbytes"}
#: What Spark itself adds: ``load(path)``/``save(path)`` and the streaming writer's settings.
_ENGINE_KEYS = {"path", "paths", "checkpointlocation", "queryname"}


class OptionError(ValueError):
    """An option is missing, unknown or malformed."""


@dataclass(frozen=True, kw_only=True)
class ConnectionOptions:
    """Where the nsqd nodes are and how to talk to them (TLS, AUTH, compression).

    Picklable: the :class:`ssl.SSLContext` is built by :meth:`client_config`,
    inside the task that opens the connection.
    """

    nsqd: tuple[str, ...] = ()
    #: nsqd HTTP addresses (``host:port`` or URLs), one per ``nsqd`` address, in order:
    #: where the readers ask the channel's depth (lookupd lists them by itself).
    nsqd_http: tuple[str, ...] = ()
    lookupd: tuple[str, ...] = ()
    tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_verify: bool = True
    tls_server_name: str | None = None
    auth_secret: str | None = None
    compression: Compression = "none"
    deflate_level: int = 6
    client_id: str | None = None
    heartbeat_interval: float | None = None
    dial_timeout: float = 5.0

    def ssl_context(self) -> ssl.SSLContext:
        """The client side of the TLS upgrade, from the configured files."""
        context = ssl.create_default_context(cafile=self.tls_ca_file)
        if self.tls_cert_file:
            context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        if not self.tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def client_config(
        self,
        *,
        msg_timeout: float | None = None,
        max_in_flight: int = 1,
        output_buffer_timeout: float | None = None,
    ) -> Config:
        """The :class:`nsqbox.client.Config` for one connection of a reader or writer."""
        extra: dict[str, object] = {}
        if self.client_id:
            extra["client_id"] = self.client_id
        if self.heartbeat_interval is not None:
            extra["heartbeat_interval"] = self.heartbeat_interval
        return Config(
            user_agent="nsqbox-spark",
            tls=self.ssl_context() if self.tls else False,
            tls_server_hostname=self.tls_server_name,
            auth_secret=self.auth_secret,
            snappy=self.compression == "snappy",
            deflate=self.compression == "deflate",
            deflate_level=self.deflate_level,
            msg_timeout=msg_timeout,
            max_in_flight=max_in_flight,
            output_buffer_timeout=output_buffer_timeout,
            dial_timeout=self.dial_timeout,
            close_timeout=5.0,
            # a reader answers on its own schedule; nothing may be retried behind Spark's back
            max_attempts=0,
            **extra,  # type: ignore[arg-type]
        )


@dataclass(frozen=True, kw_only=True)
class ReadOptions:
    """Options of ``spark.read`` and ``spark.readStream`` with ``format("nsq")``."""

    topic: str
    channel: str
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    #: Streaming: the most messages one micro-batch holds (``maxMessagesPerTrigger``, or
    #: its older name ``maxMessagesPerBatch``): the default read limit.
    max_messages_per_batch: int = 1000
    #: Streaming: plan no batch while fewer messages wait, until ``max_trigger_delay``.
    min_messages_per_trigger: int | None = None
    #: Streaming with a minimum: the longest a trigger waits for it after the last batch.
    max_trigger_delay: float = 900.0
    #: nsqd's in-flight timeout for this consumer (None: nsqd's ``--msg-timeout``, which
    #: it tells in IDENTIFY); held messages are TOUCHed well within it.
    msg_timeout: float | None = None
    #: Streaming: how long a micro-batch waits for its first message.
    poll_timeout: float = 1.0
    #: Batch: the most messages one read drains, over all partitions.
    max_messages: int = 10_000
    #: Batch: a partition stops after this long without a message.
    idle_timeout: float = 1.0
    #: Streaming with ``lookupd``: how often to look for new nsqd nodes.
    lookupd_poll_interval: float = 60.0
    #: Streaming: ``simple`` (one process beside the driver) or ``partitioned``
    #: (executors, staged in a write-ahead log).
    reader: StreamReaderKind = "simple"
    #: Partitioned streaming: the write-ahead log's directory (required there).
    wal_path: str | None = None
    #: Partitioned streaming: partitions (tasks, each with its own connections) per nsqd.
    partitions_per_node: int = 1


@dataclass(frozen=True, kw_only=True)
class WriteOptions:
    """Options of ``df.write`` and ``df.writeStream`` with ``format("nsq")``."""

    #: The default topic; a ``topic`` column, where not null, overrides it per row.
    topic: str | None = None
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    #: The most messages in one MPUB.
    batch_size: int = 500
    #: The most body bytes in one MPUB (stay under nsqd's ``--max-body-size``).
    batch_bytes: int = 1024 * 1024


# -- parsing --------------------------------------------------------------------------------------


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): str(value) for key, value in options.items() if value is not None}


def _check_known(opts: Mapping[str, str], allowed: set[str]) -> None:
    unknown = sorted(set(opts) - allowed - _ENGINE_KEYS)
    if unknown:
        raise OptionError(f"unknown option(s) for format('nsq'): {', '.join(unknown)}")


def _addresses(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    out = []
    for item in value.split(","):
        item = item.strip()
        if item:
            out.append(item)
    return tuple(out)


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    value = opts.get(key)
    if value is None:
        return default
    text = value.strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise OptionError(f"option {key!r} must be true or false, not {value!r}")


def _int(opts: Mapping[str, str], key: str, default: int, *, minimum: int = 1) -> int:
    value = opts.get(key)
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise OptionError(f"option {key!r} must be an integer, not {value!r}") from None
    if number < minimum:
        raise OptionError(f"option {key!r} must be >= {minimum}, not {number}")
    return number


def parse_duration_option(value: str, key: str = "duration") -> float:
    """A Go duration (``"1.5s"``) or a bare number of milliseconds, in seconds."""
    text = value.strip()
    try:
        seconds = float(text) / 1000 if text.replace(".", "", 1).isdigit() else parse_duration(text)
    except ValueError as exc:
        raise OptionError(f"option {key!r}: {exc}") from None
    if seconds < 0:
        raise OptionError(f"option {key!r} must not be negative")
    return seconds


def _duration(opts: Mapping[str, str], key: str, default: float | None) -> float | None:
    value = opts.get(key)
    if value is None:
        return default
    return parse_duration_option(value, key)


def _positive(opts: Mapping[str, str], key: str, default: float) -> float:
    value = _duration(opts, key, default)
    if not value:
        raise OptionError(f"option {key!r} must be positive")
    return value


def _connection(opts: Mapping[str, str]) -> ConnectionOptions:
    compression = opts.get("compression", "none").strip().lower() or "none"
    if compression not in ("none", "snappy", "deflate"):
        raise OptionError(f"option 'compression' must be none, snappy or deflate: {compression!r}")
    try:
        nsqd = tuple(format_address(a) for a in _addresses(opts.get("nsqd")))
    except ValueError as exc:
        raise OptionError(f"option 'nsqd': {exc}") from None
    cert, key = opts.get("tlscertfile"), opts.get("tlskeyfile")
    if key and not cert:
        raise OptionError("option 'tlsKeyFile' needs 'tlsCertFile'")
    deflate_level = _int(opts, "deflatelevel", 6)
    if deflate_level > 9:
        raise OptionError("option 'deflateLevel' must be in [1, 9]")
    nsqd_http = _addresses(opts.get("nsqdhttp"))
    if nsqd_http and len(nsqd_http) != len(nsqd):
        raise OptionError("option 'nsqdHttp' needs one HTTP address per 'nsqd' address")
    return ConnectionOptions(
        nsqd=nsqd,
        nsqd_http=nsqd_http,
        lookupd=_addresses(opts.get("lookupd")),
        tls=_bool(opts, "tls", False)
        or any(k in opts for k in ("tlscafile", "tlscertfile", "tlsservername")),
        tls_ca_file=opts.get("tlscafile"),
        tls_cert_file=cert,
        tls_key_file=key,
        tls_verify=_bool(opts, "tlsverify", True),
        tls_server_name=opts.get("tlsservername"),
        auth_secret=opts.get("authsecret"),
        compression=compression,  # type: ignore[arg-type]
        deflate_level=deflate_level,
        client_id=opts.get("clientid"),
        heartbeat_interval=_duration(opts, "heartbeatinterval", None),
        dial_timeout=_duration(opts, "dialtimeout", 5.0) or 5.0,
    )


def _topic(value: str) -> str:
    if not is_valid_topic_name(value):
        raise OptionError(f"invalid topic name {value!r}")
    return value


def _max_per_trigger(opts: Mapping[str, str]) -> int:
    new = _int(opts, "maxmessagespertrigger", 0) if "maxmessagespertrigger" in opts else 0
    old = _int(opts, "maxmessagesperbatch", 0) if "maxmessagesperbatch" in opts else 0
    if new and old and new != old:
        raise OptionError(
            "options 'maxMessagesPerTrigger' and 'maxMessagesPerBatch' (its older name) disagree"
        )
    return new or old or 1000


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Read options from Spark's mapping; :class:`OptionError` on anything wrong."""
    opts = _lower(options)
    _check_known(opts, _CONNECTION_KEYS | _READ_KEYS)
    topic = opts.get("topic")
    channel = opts.get("channel")
    if not topic or not channel:
        raise OptionError("reading format('nsq') needs the options 'topic' and 'channel'")
    if not is_valid_channel_name(channel):
        raise OptionError(f"invalid channel name {channel!r}")
    connection = _connection(opts)
    if not connection.nsqd and not connection.lookupd:
        raise OptionError("reading format('nsq') needs 'nsqd' or 'lookupd' addresses")
    reader = opts.get("reader", "simple").strip().lower() or "simple"
    if reader not in ("simple", "partitioned"):
        raise OptionError(f"option 'reader' must be simple or partitioned, not {reader!r}")
    wal_path = opts.get("walpath", "").strip() or None
    if reader == "partitioned" and wal_path is None:
        raise OptionError(
            "reader 'partitioned' needs the option 'walPath' (a directory every executor "
            "and the driver can write, e.g. next to the checkpoint)"
        )
    max_per_trigger = _max_per_trigger(opts)
    min_per_trigger = (
        _int(opts, "minmessagespertrigger", 1) if "minmessagespertrigger" in opts else None
    )
    if min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise OptionError("option 'minMessagesPerTrigger' must not exceed 'maxMessagesPerTrigger'")
    return ReadOptions(
        topic=_topic(topic),
        channel=channel,
        connection=connection,
        max_messages_per_batch=max_per_trigger,
        min_messages_per_trigger=min_per_trigger,
        max_trigger_delay=_duration(opts, "maxtriggerdelay", 900.0) or 0.0,
        msg_timeout=_positive(opts, "msgtimeout", 0.0) if "msgtimeout" in opts else None,
        poll_timeout=_duration(opts, "polltimeout", 1.0) or 0.0,
        max_messages=_int(opts, "maxmessages", 10_000),
        idle_timeout=_duration(opts, "idletimeout", 1.0) or 0.0,
        lookupd_poll_interval=_duration(opts, "lookupdpollinterval", 60.0) or 60.0,
        reader=reader,  # type: ignore[arg-type]
        wal_path=wal_path,
        partitions_per_node=_int(opts, "partitionspernode", 1),
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Write options from Spark's mapping; :class:`OptionError` on anything wrong."""
    opts = _lower(options)
    _check_known(opts, _CONNECTION_KEYS | _WRITE_KEYS)
    connection = _connection(opts)
    if not connection.nsqd:
        raise OptionError("writing format('nsq') needs 'nsqd' addresses to publish to")
    topic = opts.get("topic")
    return WriteOptions(
        topic=_topic(topic) if topic else None,
        connection=connection,
        batch_size=_int(opts, "batchsize", 500),
        batch_bytes=_int(opts, "batchbytes", 1024 * 1024),
    )
