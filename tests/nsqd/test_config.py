"""nsqd's flags and TOML config resolved into NSQDOptions as nsqd v1.3.0 does."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from nsqbox.go.flags import FlagError, HelpRequested
from nsqbox.nsqd.config import (
    NSQD_OPTION_FLAGS,
    ConfigError,
    nsqd_flag_set,
    parse_nsqd_args,
)
from nsqbox.nsqd.domain.options import (
    TLS_NOT_REQUIRED,
    TLS_REQUIRED,
    TLS_REQUIRED_EXCEPT_HTTP,
    NSQDOptions,
)

# Every flag nsqd v1.3.0 defines (apps/nsqd/options.go), plus auth-http-request-method from
# later NSQ releases and nsqbox's own allowed-host and journal-size.
NSQD_FLAGS = {
    "version", "config", "log-level", "log-prefix", "verbose", "node-id", "worker-id",
    "https-address", "http-address", "tcp-address", "auth-http-address", "broadcast-address",
    "broadcast-tcp-port", "broadcast-http-port", "lookupd-tcp-address",
    "http-client-connect-timeout", "http-client-request-timeout", "data-path", "mem-queue-size",
    "max-bytes-per-file", "sync-every", "sync-timeout", "queue-scan-worker-pool-max",
    "queue-scan-selection-count", "msg-timeout", "max-msg-timeout", "max-msg-size",
    "max-req-timeout", "max-body-size", "max-heartbeat-interval", "max-rdy-count",
    "max-output-buffer-size", "max-output-buffer-timeout", "min-output-buffer-timeout",
    "output-buffer-timeout", "max-channel-consumers", "statsd-address", "statsd-interval",
    "statsd-mem-stats", "statsd-prefix", "statsd-udp-packet-size", "statsd-exclude-ephemeral",
    "e2e-processing-latency-percentile", "e2e-processing-latency-window-time", "tls-cert",
    "tls-key", "tls-client-auth-policy", "tls-root-ca-file", "tls-required", "tls-min-version",
    "deflate", "max-deflate-level", "snappy", "auth-http-request-method", "allowed-host",
    "journal-size",
}  # fmt: skip


def parse(*args: str) -> NSQDOptions:
    return parse_nsqd_args(list(args)).options


def write_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "nsqd.cfg"
    path.write_text(text)
    return str(path)


def test_flag_set_has_exactly_nsqds_flags() -> None:
    flags = nsqd_flag_set()
    assert {name for name in NSQD_FLAGS if name in flags} == NSQD_FLAGS
    assert len(flags.usage().split("\n  -")) - 1 == len(NSQD_FLAGS)


def test_every_option_flag_names_a_field() -> None:
    fields = {f.name for f in dataclasses.fields(NSQDOptions)}
    assert {opt.attr for opt in NSQD_OPTION_FLAGS} <= fields


def test_no_arguments_give_the_defaults() -> None:
    command = parse_nsqd_args([])
    assert command.options == NSQDOptions()
    assert command.show_version is False
    assert command.args == []


def test_help_shows_go_style_defaults() -> None:
    with pytest.raises(HelpRequested) as info:
        parse_nsqd_args(["--help"])
    usage = info.value.usage
    assert usage.startswith("Usage of nsqd:\n")
    assert '(default "127.0.0.1:4150")' in usage
    assert "  -msg-timeout duration\n" in usage
    assert "(default 1m0s)" in usage
    assert "(default 15m0s)" in usage
    assert "(default 250ms)" in usage
    assert "(default INFO)" in usage
    assert "(default tls1.0)" in usage
    assert "  -tls-required\n" in usage  # a bool-style flag: no placeholder


@pytest.mark.parametrize(
    "args",
    [
        ["-tcp-address=127.0.0.1:0", "-mem-queue-size=5"],
        ["--tcp-address=127.0.0.1:0", "--mem-queue-size=5"],
        ["-tcp-address", "127.0.0.1:0", "-mem-queue-size", "5"],
        ["--tcp-address", "127.0.0.1:0", "--mem-queue-size", "0x5"],
    ],
)
def test_single_and_double_dash(args: list[str]) -> None:
    options = parse(*args)
    assert (options.tcp_address, options.mem_queue_size) == ("127.0.0.1:0", 5)


def test_durations_are_seconds() -> None:
    options = parse("--msg-timeout=90s", "--max-req-timeout", "2h", "--output-buffer-timeout=100ms")
    assert (options.msg_timeout, options.max_req_timeout) == (90.0, 7200.0)
    assert options.output_buffer_timeout == pytest.approx(0.1)


def test_bools_and_repeatable_addresses() -> None:
    options = parse(
        "--snappy=false",
        "--deflate=0",
        "--statsd-exclude-ephemeral",
        "--lookupd-tcp-address=127.0.0.1:4160",
        "--lookupd-tcp-address=10.0.0.1:4160",
        "--auth-http-address=http://auth/",
    )
    assert (options.snappy, options.deflate, options.statsd_exclude_ephemeral) == (
        False,
        False,
        True,
    )
    assert options.lookupd_tcp_addresses == ["127.0.0.1:4160", "10.0.0.1:4160"]
    assert options.auth_http_addresses == ["http://auth/"]


def test_e2e_percentiles_comma_separated_and_repeated() -> None:
    options = parse(
        "--e2e-processing-latency-percentile=0.5,1.0",
        "--e2e-processing-latency-percentile",
        "0.99",
    )
    assert options.e2e_processing_latency_percentiles == [1.0, 0.99, 0.5]


def test_e2e_percentile_out_of_range_is_refused_at_start() -> None:
    with pytest.raises(ConfigError) as info:
        parse("--e2e-processing-latency-percentile=1.5")
    assert (
        str(info.value)
        == "failed to instantiate nsqd - invalid E2E processing latency percentile: 1.5"
    )


@pytest.mark.parametrize(
    ("arg", "required"),
    [
        ("--tls-required", TLS_REQUIRED),
        ("--tls-required=true", TLS_REQUIRED),
        ("--tls-required=TCP-HTTPS", TLS_REQUIRED_EXCEPT_HTTP),
        ("--tls-required=false", TLS_NOT_REQUIRED),
        ("--tls-required=0", TLS_NOT_REQUIRED),
    ],
)
def test_tls_required(arg: str, required: int) -> None:
    assert parse(arg, "--tls-cert=c.pem", "--tls-key=k.pem").tls_required == required


def test_tls_required_bare_does_not_take_the_next_argument() -> None:
    command = parse_nsqd_args(["--tls-cert=c", "--tls-key=k", "--tls-required", "false"])
    assert command.options.tls_required == TLS_REQUIRED
    assert command.args == ["false"]


def test_tls_required_bad_value() -> None:
    with pytest.raises(FlagError) as info:
        parse("--tls-required=maybe")
    assert str(info.value) == (
        'invalid boolean value "maybe" for -tls-required: '
        'strconv.ParseBool: parsing "maybe": invalid syntax'
    )


def test_tls_required_without_cert_is_refused() -> None:
    with pytest.raises(ConfigError, match="cannot require TLS client connections without TLS"):
        parse("--tls-required")


def test_client_auth_policy_implies_tls_required() -> None:
    options = parse("--tls-client-auth-policy=require", "--tls-cert=c", "--tls-key=k")
    assert options.tls_required == TLS_REQUIRED


@pytest.mark.parametrize(("value", "expected"), [("TLS1.2", "tls1.2"), ("", "tls1.0")])
def test_tls_min_version(value: str, expected: str) -> None:
    assert parse(f"--tls-min-version={value}").tls_min_version == expected


def test_tls_min_version_unknown() -> None:
    with pytest.raises(FlagError) as info:
        parse("--tls-min-version=ssl3.0")
    assert str(info.value) == (
        'invalid value "ssl3.0" for flag -tls-min-version: unknown tlsVersionOption "ssl3.0"'
    )


@pytest.mark.parametrize(
    ("value", "level"), [("DEBUG", "debug"), ("Warn", "warn"), ("fatal", "fatal")]
)
def test_log_level(value: str, level: str) -> None:
    assert parse("--log-level", value).log_level == level


def test_log_level_unknown() -> None:
    with pytest.raises(FlagError) as info:
        parse("--log-level=loud")
    assert str(info.value) == (
        'invalid value "loud" for flag -log-level: '
        "invalid log level 'loud' (debug, info, warn, error, fatal)"
    )


def test_deprecated_flags_are_accepted_and_ignored() -> None:
    assert parse("--verbose", "-worker-id") == NSQDOptions()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-deflate-level=10"], "--max-deflate-level must be [1,9]"),
        (["--node-id=1024"], "--node-id must be [0,1024)"),
        (["--auth-http-request-method=put"], "--auth-http-request-method must be post or get"),
    ],
)
def test_start_up_checks(args: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_nsqd_args(args)
    assert str(info.value) == f"failed to instantiate nsqd - {message}"


def test_version_skips_the_config_file(tmp_path: Path) -> None:
    command = parse_nsqd_args(["--config", str(tmp_path / "missing.cfg"), "-version"])
    assert command.show_version is True


def test_arguments_after_flags_are_returned() -> None:
    assert parse_nsqd_args(["-snappy", "false", "-deflate=false"]).args == [
        "false",
        "-deflate=false",
    ]


def test_flag_errors_carry_usage() -> None:
    with pytest.raises(FlagError) as info:
        parse("--nope")
    assert str(info.value) == "flag provided but not defined: -nope"
    assert info.value.usage.startswith("Usage of nsqd:")


def test_defaults_may_be_replaced() -> None:
    defaults = NSQDOptions(data_path="./box")
    command = parse_nsqd_args([], defaults=defaults)
    assert command.options.data_path == "./box"
    assert command.options is not defaults


# --- the config file -----------------------------------------------------------------------------

# Shaped like NSQ's contrib/nsqd.cfg.example.
EXAMPLE = """
log_level = "debug"
id = 42
tcp_address = "127.0.0.1:14150"
http_address = "127.0.0.1:14151"
nsqlookupd_tcp_addresses = [
    "127.0.0.1:4160"
]
http_client_connect_timeout = "2s"
mem_queue_size = 500
sync_timeout = "3s"
msg_timeout = "60s"
max_msg_timeout = "15m"
max_msg_size = 1024768
max_req_timeout = "1h"
max_output_buffer_timeout = "1s"
statsd_prefix = "nsq.%s"
statsd_mem_stats = true
e2e_processing_latency_percentiles = [1.0, 0.99, 0.95]
e2e_processing_latency_window_time = "10m"
tls_cert = ""
tls_key = ""
tls_required = false
tls_min_version = ""
"""


def test_example_config(tmp_path: Path) -> None:
    options = parse("--config", write_config(tmp_path, EXAMPLE))
    assert options.log_level == "debug"
    assert options.node_id == 42
    assert options.tcp_address == "127.0.0.1:14150"
    assert options.lookupd_tcp_addresses == ["127.0.0.1:4160"]
    assert options.mem_queue_size == 500
    assert options.sync_timeout == 3.0
    assert options.max_msg_timeout == 900.0
    assert options.max_output_buffer_timeout == 1.0
    assert options.max_msg_size == 1024768
    assert options.e2e_processing_latency_percentiles == [1.0, 0.99, 0.95]
    assert options.e2e_processing_latency_window_time == 600.0
    assert options.tls_required == TLS_NOT_REQUIRED
    assert options.tls_min_version == "tls1.0"  # "" keeps the default
    assert options.snappy is True  # not in the file: default


def test_flag_beats_config_beats_default(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'mem_queue_size = 7\nmax_rdy_count = 9\ntcp_address = "x:1"\n')
    options = parse("-config", path, "-mem-queue-size=3")
    assert options.mem_queue_size == 3
    assert options.max_rdy_count == 9
    assert options.max_body_size == NSQDOptions().max_body_size
    assert options.tcp_address == "x:1"


def test_flag_given_with_its_default_value_still_wins(tmp_path: Path) -> None:
    path = write_config(tmp_path, "max_rdy_count = 9\n")
    assert parse("-config", path, "-max-rdy-count=2500").max_rdy_count == 2500


E2E = "e2e_processing_latency_percentiles"


@pytest.mark.parametrize(
    ("line", "field", "value"),
    [
        ("msg_timeout = 1500", "msg_timeout", 1.5),  # bare integers are milliseconds
        ('msg_timeout = "1m30s"', "msg_timeout", 90.0),
        ('max_rdy_count = "200"', "max_rdy_count", 200),
        ('snappy = "false"', "snappy", False),
        ("snappy = false", "snappy", False),
        ("snappy = 1", "snappy", True),
        ('nsqlookupd_tcp_addresses = "a:1,b:2"', "lookupd_tcp_addresses", ["a:1", "b:2"]),
        ('auth_http_addresses = ["a:1"]', "auth_http_addresses", ["a:1"]),
        (f'{E2E} = "0.5, 0.9"', E2E, [0.5, 0.9]),
        (f"{E2E} = [1, 0.5]", E2E, [1.0, 0.5]),
        ('tls_min_version = "TLS1.3"', "tls_min_version", "tls1.3"),
        ('log_level = "WARN"', "log_level", "warn"),
        ("statsd_prefix = 5", "statsd_prefix", "5"),
        ("node_id = 5", "node_id", NSQDOptions().node_id),  # nsqd's key is "id"
        ("no_such_option = 1", "mem_queue_size", 10000),  # unknown keys are ignored
    ],
)  # fmt: skip
def test_config_value_coercion(tmp_path: Path, line: str, field: str, value: object) -> None:
    options = parse("--config", write_config(tmp_path, line + "\n"))
    assert getattr(options, field) == value


@pytest.mark.parametrize(
    ("line", "required"),
    [
        ("tls_required = true", TLS_REQUIRED),
        ('tls_required = "tcp-https"', TLS_REQUIRED_EXCEPT_HTTP),
        ("tls_required = 0", TLS_NOT_REQUIRED),
    ],
)
def test_config_tls_required(tmp_path: Path, line: str, required: int) -> None:
    path = write_config(tmp_path, f'{line}\ntls_cert = "c"\ntls_key = "k"\n')
    assert parse("--config", path).tls_required == required


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('tls_required = "maybe"', "failed parsing tls_required maybe"),
        ('tls_min_version = "ssl3.0"', "failed parsing tls_min_version ssl3.0"),
        ('log_level = "loud"', "failed parsing log_level loud"),
    ],
)
def test_config_validate_is_fatal_even_when_a_flag_overrides(
    tmp_path: Path, line: str, message: str
) -> None:
    path = write_config(tmp_path, line + "\n")
    with pytest.raises(ConfigError) as info:
        parse(
            "--config", path, "--tls-required=false", "--tls-min-version=tls1.2", "--log-level=info"
        )
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        ('msg_timeout = "5"', 'time: missing unit in duration "5"'),
        ("msg_timeout = 1.5", "invalid time.Duration value type float64"),
        ("max_rdy_count = 1.5", "invalid int64 value type float64"),
        ('max_rdy_count = "0x10"', 'strconv.ParseInt: parsing "0x10": invalid syntax'),
        ('snappy = "yes"', 'strconv.ParseBool: parsing "yes": invalid syntax'),
        ("nsqlookupd_tcp_addresses = [1]", "invalid value type []interface {}"),
    ],
)
def test_config_coercion_errors(tmp_path: Path, line: str, detail: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse("--config", write_config(tmp_path, line + "\n"))
    shown = line.replace('"', "")
    assert str(info.value) == f"failed to coerce config value {shown} - {detail}"


def test_config_value_not_used_is_not_coerced(tmp_path: Path) -> None:
    path = write_config(tmp_path, "msg_timeout = 1.5\n")
    assert parse("--config", path, "--msg-timeout=2s").msg_timeout == 2.0


def test_config_file_missing(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.cfg")
    with pytest.raises(ConfigError) as info:
        parse("--config", path)
    assert str(info.value) == (
        f"failed to load config file {path} - open {path}: no such file or directory"
    )


def test_config_file_not_toml(tmp_path: Path) -> None:
    path = write_config(tmp_path, "this is = = not toml\n")
    with pytest.raises(ConfigError, match=r"^failed to load config file .* - "):
        parse("--config", path)
