"""``nsqbox pub``, ``tail`` and ``stat`` against a real ``nsqbox up`` child process.

The tools run in-process through ``nsqbox.cli.main`` (each does its own ``trio.run``), so these
tests are synchronous; the box is a child process shared by the module (unique topic per test).
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from nsqbox import cli
from nsqbox.go.flags import FlagSet
from nsqbox.tools.common import parse_args
from nsqbox.tools.stat import format_header
from tests.tools.box_process import TIMEOUT, BoxProcess, running_box


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoxProcess]:
    yield from running_box(tmp_path_factory, "--nsqd-count=2")


def nsqd_tcp(box: BoxProcess, index: int = 0) -> str:
    return str(box.ready["nsqd_tcp_addresses"][index])


def nsqd_http(box: BoxProcess, index: int = 0) -> str:
    return str(box.ready["nsqd_http_addresses"][index])


def topic_stats(box: BoxProcess, topic: str, index: int = 0) -> dict[str, Any]:
    url = f"http://{nsqd_http(box, index)}/stats"
    doc = httpx.get(url, params={"format": "json", "topic": topic}, timeout=TIMEOUT).json()
    [row] = doc["topics"]
    return dict(row)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = cli.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_parse_args_takes_flags_between_arguments() -> None:
    flags = FlagSet("t")
    flags.add_string("a", "", "")
    flags.add_bool("b", False, "")
    args = parse_args(flags, ["x", "-a", "1", "y", "-b", "--", "-z", "-a=2"])
    assert args.positional == ["x", "y", "-z", "-a=2"]
    assert (flags["a"].value.value, flags["b"].value.value) == ("1", True)


def test_pub_arguments_then_tail(box: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    address = f"--nsqd-tcp-address={nsqd_tcp(box)}"
    assert run(capsys, "pub", "t_args", address, "hello", "wörld") == (0, "", "")
    assert topic_stats(box, "t_args")["message_count"] == 2
    # The topic has no channel yet, so the tail's new channel gets what the topic holds.
    assert run(capsys, "tail", address, "-n", "2", "t_args") == (0, "hello\nwörld\n", "")


def test_pub_stdin_skips_empty_messages(
    box: BoxProcess, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a,b,,c")))
    status = cli.main(
        ["pub", "--topic=t_stdin", "--delimiter=,", "-nsqd-tcp-address", nsqd_tcp(box)]
    )
    assert status == 0
    assert topic_stats(box, "t_stdin")["message_count"] == 3
    args = ["tail", f"--nsqd-tcp-address={nsqd_tcp(box)}", "-n=3", "--print-topic", "t_stdin"]
    assert run(capsys, *args) == (0, "t_stdin | a\nt_stdin | b\nt_stdin | c\n", "")


def test_pub_goes_to_every_nsqd_and_tail_reads_every_node(
    box: BoxProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    to_both = ["--nsqd-tcp-address", nsqd_tcp(box, 0), "--nsqd-tcp-address", nsqd_tcp(box, 1)]
    assert run(capsys, "pub", *to_both, "--rate=100", "t_both", "m1", "m2")[0] == 0
    assert [topic_stats(box, "t_both", i)["message_count"] for i in (0, 1)] == [2, 2]
    lookupd = ["--lookupd-http-address", box.ready["lookupd_http_address"]]
    status, out, _ = run(
        capsys, "tail", *lookupd, "--lookupd-poll-interval=100ms", "-n=4", "t_both"
    )
    assert status == 0
    assert sorted(out.splitlines()) == ["m1", "m1", "m2", "m2"]


def test_tail_leaves_the_rest_for_the_next_reader(
    box: BoxProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    address = f"--nsqd-tcp-address={nsqd_tcp(box)}"
    assert run(capsys, "pub", address, "t_rest", "1", "2", "3", "4", "5")[0] == 0
    assert run(capsys, "tail", address, "--channel=keep", "-n=2", "t_rest") == (0, "1\n2\n", "")
    # a message nsqd sent the first tail after a FIN freed its RDY, and the tail did not print,
    # went back to the channel when it closed: NSQ keeps no order for requeued messages
    status, out, err = run(capsys, "tail", address, "--channel=keep", "-n=3", "t_rest")
    assert (status, sorted(out.splitlines()), err) == (0, ["3", "4", "5"], "")
    channel = topic_stats(box, "t_rest")["channels"][0]
    assert (channel["channel_name"], channel["depth"], channel["in_flight_count"]) == ("keep", 0, 0)


def test_stat_prints_nsq_stat_lines(box: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    base = f"http://{nsqd_http(box)}"
    params = {"topic": "t_stat", "channel": "c"}
    httpx.post(f"{base}/topic/create", params=params, timeout=TIMEOUT).raise_for_status()
    httpx.post(f"{base}/channel/create", params=params, timeout=TIMEOUT).raise_for_status()
    assert run(capsys, "pub", f"--nsqd-tcp-address={nsqd_tcp(box)}", "t_stat", "x", "y")[0] == 0
    for where in (
        ["--nsqd-http-address", nsqd_http(box)],
        ["--lookupd-http-address", box.ready["lookupd_http_address"]],
    ):
        status, out, err = run(
            capsys, "stat", *where, "--topic=t_stat", "--channel=c", "--count=2", "--interval=10ms"
        )
        assert (status, err) == (0, "")
        lines = out.splitlines(keepends=True)
        assert "".join(lines[:2]) == format_header()
        # ingress egress | total mem disk inflt def | req t-o msgs clients: steady, two queued
        row = f"{0:7d} {0:7d} | {2:7d} {2:7d} {0:7d} {0:5d} {0:5d} | {0:7d} {0:7d} {2:12d} {0:7d}\n"
        assert lines[2:] == [row, row]


def test_stat_positional_topic_channel(box: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "pub", f"--nsqd-tcp-address={nsqd_tcp(box)}", "t_pos", "x")[0] == 0
    status, _, err = run(
        capsys, "stat", f"--nsqd-http-address={nsqd_http(box)}", "t_pos", "nope", "--count=1"
    )
    assert status == 1
    assert err.endswith(" ERROR: failed to find channel(nope) in stats metadata for topic(t_pos)\n")


def test_pub_defer_holds_the_message(box: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    base = f"http://{nsqd_http(box)}"
    params = {"topic": "t_defer", "channel": "c"}
    for path in ("topic", "channel"):
        httpx.post(f"{base}/{path}/create", params=params, timeout=TIMEOUT).raise_for_status()
    address = f"--nsqd-tcp-address={nsqd_tcp(box)}"
    assert run(capsys, "pub", address, "--defer", "30m", "t_defer", "later") == (0, "", "")
    [channel] = topic_stats(box, "t_defer")["channels"]
    assert (channel["deferred_count"], channel["depth"]) == (1, 0)  # held, not queued
    # nsqd's bound for DPUB, as for /pub?defer=: its --max-req-timeout (1h by default)
    status, _, err = run(capsys, "pub", address, "--defer=2h", "t_defer", "too late")
    assert status == 1
    assert "E_INVALID DPUB timeout 7200000 out of range 0-3600000" in err
    assert topic_stats(box, "t_defer")["channels"][0]["deferred_count"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pub"], "--topic required"),
        (["pub", "--defer=-5s", "t", "x"], "--defer must not be negative, not -5s"),
        (["pub", "--delimiter=ab", "t"], "--delimiter must be a single byte"),
        (
            ["pub", "--nsqd-tcp-address=127.0.0.1:1", "t", "x"],
            "failed to connect to nsqd 127.0.0.1:1",
        ),
        (["tail"], "--topic required"),
        (
            ["tail", "--nsqd-tcp-address=a:1", "--lookupd-http-address=b:2", "t"],
            "use --nsqd-tcp-address or --lookupd-http-address not both",
        ),
        (["tail", "--nsqd-tcp-address=127.0.0.1:1", "t"], "failed to connect to nsqd 127.0.0.1:1"),
        (["tail", "bad topic"], "invalid topic name 'bad topic'"),
        (["tail", "--channel=a/b", "t"], "invalid channel name 'a/b'"),
        (["tail", "--log-level=loud", "t"], "invalid log level 'loud'"),
        (["stat", "--topic=t"], "--topic and --channel are required"),
        (["stat", "t", "c", "--count=0"], "--count should be positive"),
        (["stat", "t", "c", "--interval=0s"], "--interval should be positive"),
        (
            ["stat", "t", "c", "--lookupd-http-address=http://h:1"],
            "--lookupd-http-address error - address should not contain scheme",
        ),
        (
            ["stat", "t", "c", "--nsqd-http-address=127.0.0.1:1", "--count=1"],
            "ERROR: failed to get topic producers - failed to query any nsqd",
        ),
    ],
)
def test_fatal_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    status, _, err = run(capsys, *args)
    assert status == 1
    assert re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (.*)\n", err, re.DOTALL), err
    assert message in err


def test_pub_refuses_what_nsqd_refuses(box: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "pub", f"--nsqd-tcp-address={nsqd_tcp(box)}", "bad topic!", "x")
    assert status == 1
    assert "failed to publish to" in err


@pytest.mark.parametrize("tool", ["pub", "tail", "stat"])
def test_version_and_help(capsys: pytest.CaptureFixture[str], tool: str) -> None:
    status, out, _ = run(capsys, tool, "--version")
    assert status == 0
    assert re.fullmatch(rf"nsqbox {tool} v1\.3\.0 \(built w/\S+\)\n", out)
    status, _, err = run(capsys, tool, "-h")
    assert status == 0
    assert f"Usage of nsqbox {tool}:\n" in err
    status, _, err = run(capsys, tool, "--no-such-flag")
    assert status == 2
    assert err.startswith("flag provided but not defined: -no-such-flag\n")


def test_stat_help_says_topic_and_channel_are_required(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "stat", "-h")
    assert status == 0
    assert err.startswith("usage: nsqbox stat [--topic] TOPIC [--channel] CHANNEL [flags]\n")
    assert "both TOPIC and CHANNEL are required, as nsq_stat requires both" in err
    assert "NSQ topic (required; or the first argument)" in err
    assert "NSQ channel (required; or the second argument)" in err
