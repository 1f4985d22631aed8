"""Option parsing for format("nsq"): pure, no pyspark needed."""

from __future__ import annotations

import pickle

import pytest

from nsqbox.spark.options import (
    OptionError,
    ReadOptions,
    parse_duration_option,
    parse_read_options,
    parse_write_options,
)

READ = {"topic": "events", "channel": "spark", "nsqd": "127.0.0.1:4150"}


def test_read_defaults() -> None:
    opts = parse_read_options(READ)
    # msg_timeout unset: nsqd's own --msg-timeout, whatever its --max-msg-timeout
    assert opts == ReadOptions(
        topic="events", channel="spark", connection=opts.connection, msg_timeout=None
    )
    assert opts.connection.nsqd == ("127.0.0.1:4150",)
    assert opts.max_messages_per_batch == 1000
    assert (opts.poll_timeout, opts.idle_timeout, opts.max_messages) == (1.0, 1.0, 10_000)


def test_names_are_case_insensitive_and_values_are_strings() -> None:
    opts = parse_read_options(
        {
            "TOPIC": "events",
            "Channel": "spark#ephemeral",
            "NSQD": " 127.0.0.1:4150, [::1]:4151 ,",
            "maxmessagesperbatch": "50",
            "MSGTIMEOUT": "1s",
            "pollTimeout": "250",
        }
    )
    assert opts.channel == "spark#ephemeral"
    assert opts.connection.nsqd == ("127.0.0.1:4150", "[::1]:4151")
    assert opts.max_messages_per_batch == 50
    assert opts.msg_timeout == 1.0
    assert opts.poll_timeout == 0.25


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("1500ms", 1.5), ("2m", 120.0), ("250", 0.25), ("0", 0.0), ("1.5", 0.0015)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration_option(text) == seconds


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "t", "nsqd": "127.0.0.1:1"}, "'topic' and 'channel'"),
        ({"topic": "t", "channel": "c"}, "'nsqd' or 'lookupd'"),
        ({**READ, "topic": "bad topic"}, "invalid topic name"),
        ({**READ, "channel": "a/b"}, "invalid channel name"),
        ({**READ, "maxMessagesPerBatch": "0"}, "must be >= 1"),
        ({**READ, "maxMessagesPerBatch": "ten"}, "must be an integer"),
        ({**READ, "msgTimeout": "soon"}, "invalid duration"),
        ({**READ, "msgTimeout": "0s"}, "must be positive"),
        ({**READ, "tls": "maybe"}, "true or false"),
        ({**READ, "compression": "zstd"}, "none, snappy or deflate"),
        ({**READ, "tlsKeyFile": "k.pem"}, "needs 'tlsCertFile'"),
        ({**READ, "nsqd": "localhost"}, "host:port"),
        ({**READ, "batchSize": "5"}, "unknown option(s) for format('nsq'): batchsize"),
    ],
)
def test_bad_read_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_read_options(options)


def test_write_options() -> None:
    opts = parse_write_options({"nsqd": "127.0.0.1:4150", "batchSize": "10", "batchBytes": "99"})
    assert opts.topic is None
    assert (opts.batch_size, opts.batch_bytes) == (10, 99)
    with pytest.raises(OptionError, match="needs 'nsqd'"):
        parse_write_options({"lookupd": "127.0.0.1:4161", "topic": "t"})
    with pytest.raises(OptionError, match="unknown option"):
        parse_write_options({"nsqd": "127.0.0.1:4150", "channel": "c"})


def test_tls_and_auth_reach_the_client_config() -> None:
    opts = parse_read_options(
        {
            **READ,
            "tlsVerify": "false",
            "tlsServerName": "nsqd.example",
            "authSecret": "s3cret",
            "compression": "snappy",
            "clientId": "spark-1",
        }
    )
    config = opts.connection.client_config(msg_timeout=5.0, max_in_flight=20)
    assert config.wants_tls
    assert config.tls_server_hostname == "nsqd.example"
    assert config.auth_secret == "s3cret"
    assert config.snappy
    assert not config.deflate
    assert config.client_id == "spark-1"
    assert (config.msg_timeout, config.max_in_flight, config.max_attempts) == (5.0, 20, 0)


def test_options_pickle() -> None:
    # Spark ships readers and writers, options included, to other processes.
    opts = parse_read_options({**READ, "tls": "true"})
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_reader_choice() -> None:
    simple = parse_read_options(READ)
    assert (simple.reader, simple.wal_path, simple.partitions_per_node) == ("simple", None, 1)
    opts = parse_read_options(
        {**READ, "Reader": "Partitioned", "walPath": "/data/wal", "partitionsPerNode": "3"}
    )
    assert (opts.reader, opts.wal_path, opts.partitions_per_node) == ("partitioned", "/data/wal", 3)
    with pytest.raises(OptionError, match="needs the option 'walPath'"):
        parse_read_options({**READ, "reader": "partitioned"})
    with pytest.raises(OptionError, match="must be simple or partitioned"):
        parse_read_options({**READ, "reader": "kafka"})
    with pytest.raises(OptionError, match="'partitionspernode' must be >= 1"):
        parse_read_options({**READ, "partitionsPerNode": "0"})
