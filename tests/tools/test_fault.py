"""``nsqbox fault`` against a real ``nsqbox up`` child process, and node control in-process.

The command runs in-process through ``nsqbox.cli.main`` (its own ``trio.run``), so most tests
are synchronous; node control needs an admin service given a control, which the test runs on
its own loop (:func:`tests.admin.conftest.start_controlled`) and drives with the command's
:func:`~nsqbox.tools.faults.run_command`.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox import cli
from nsqbox.admin.faults import FaultError
from nsqbox.admin.faults_client import AdminFaults
from nsqbox.tools.common import parse_args
from nsqbox.tools.faults import fault_flag_set, parse_command, run_command
from tests.admin.conftest import start_controlled
from tests.tools.box_process import TIMEOUT, BoxProcess, admin_command, running_box


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoxProcess]:
    yield from running_box(tmp_path_factory, "--nsqd-count=2")


def fault(box: BoxProcess, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return admin_command(box, capsys, "fault", *args)


def pub(box: BoxProcess, index: int, topic: str) -> int:
    address = box.ready["nsqd_http_addresses"][index]
    response = httpx.post(
        f"http://{address}/pub", params={"topic": topic}, content=b"m", timeout=TIMEOUT
    )
    return response.status_code


def test_add_list_lift(box: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    node0 = box.ready["nsqd_http_addresses"][0]
    status, out, _ = fault(box, capsys, "list")
    assert (status, out.splitlines()[0]) == (0, "no faults in force")
    status, out, err = fault(
        box, capsys, "add", "fail_publishes", "--node", node0, "--topic", "orders", "--count=2"
    )
    assert status == 0, err
    match = re.fullmatch(rf"fault (\d+) on {re.escape(node0)}: fail_publishes topic=orders\n", out)
    assert match, out
    fault_id = match[1]
    assert pub(box, 0, "orders") == 503
    assert pub(box, 1, "orders") == 200

    status, out, _ = fault(box, capsys, "list")
    header, line = out.splitlines()[:2]  # then the nodes without fault routes, if any
    assert header.split() == ["NODE", "ID", "KIND", "SCOPE", "LEFT", "SINCE"]
    assert line.split()[:6] == [node0, fault_id, "fail_publishes", "topic=orders", "1", "command"]
    status, out, _ = fault(box, capsys, "list", "--json")
    [listed] = json.loads(out)["faults"]
    assert (listed["node"], listed["remaining"], listed["topic"]) == (node0, 1, "orders")

    assert fault(box, capsys, "lift", fault_id, "--node", node0)[:2] == (
        0,
        f"lifted fault {fault_id}\n",
    )
    assert pub(box, 0, "orders") == 200
    status, out, err = fault(box, capsys, "lift", fault_id, "--node", node0)
    assert (status, out) == (1, "")
    assert err.endswith(f" nsqbox fault lift: no fault {fault_id} in force\n")
    status, _, err = fault(box, capsys, "lift", "99", "--node", node0, "--json")
    assert status == 1
    assert "no fault 99 in force" in err


def test_kinds_params_and_lift_all(box: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    node0, node1 = box.ready["nsqd_http_addresses"]
    status, out, err = fault(box, capsys, "add", "disk_full", "--node", node1, "--duration=30s")
    assert (status, out.split(": ")[1]) == (0, "disk_full *\n"), err
    ping = httpx.get(f"http://{node1}/ping", timeout=TIMEOUT)
    assert (ping.status_code, ping.text) == (500, "NOK - write: no space left on device")
    status, out, err = fault(
        box, capsys, "add", "time_out_in_flight", "--node", node0, "--param", "topic=orders"
    )
    assert (status, out) == (0, f"time_out_in_flight on {node0}: 0\n"), err
    status, out, _ = fault(box, capsys, "lift", "--all", "--json")
    assert (status, json.loads(out)) == (0, {"lifted": 1, "message": ""})
    assert httpx.get(f"http://{node1}/ping", timeout=TIMEOUT).text == "OK"


def test_list_says_what_is_left(box: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    node0, node1 = box.ready["nsqd_http_addresses"]
    adds = [
        ["disk_full", "--node", node1, "--duration=10m"],
        ["stall", "--node", node0, "--topic", "nowhere", "--count=2"],
        ["latency", "--node", node0, "--topic", "nowhere", "--count=1", "--param", "delay=0.1"],
        ["fail_publishes", "--node", node0, "--topic", "nowhere", "--count=3", "--duration=2h"],
        ["fail_publishes", "--node", node0, "--topic", "elsewhere"],
    ]
    try:
        for args in adds:
            status, _, err = fault(box, capsys, "add", *args)
            assert status == 0, err
        status, out, _ = fault(box, capsys, "list", "--json")
        listed = {(f["kind"], f["topic"]): f for f in json.loads(out)["faults"]}
        disk = listed["disk_full", None]
        assert disk["until"] == pytest.approx(disk["since"] + 600)
        assert 0 < disk["left"] <= 600
        assert listed["fail_publishes", "elsewhere"]["until"] is None
        assert listed["fail_publishes", "elsewhere"]["left"] is None
        status, out, _ = fault(box, capsys, "list")
        left = {line.split()[2]: line for line in out.splitlines()[1:6]}
        assert re.search(r"  (600s|\d+m\d\ds)  ", left["disk_full"]), left
        assert "  2 connections  " in left["stall"]
        assert "  1 write  " in left["latency"]
        rows = [line for line in out.splitlines() if "fail_publishes" in line]
        assert re.search(r"  3 commands or (2h00m|1h59m)  ", rows[0]), rows
        assert "  until lifted  " in rows[1]
    finally:
        assert fault(box, capsys, "lift", "--all")[0] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "fail_publishes"], "MISSING_ARG_NODE: name one of 2 nsqds with --node: 127."),
        (["restart"], "MISSING_ARG_NODE: name one of 2 nsqds with --node: 0 (127.0.0.1:"),
        (["add", "no_such", "--node", "0"], "UNKNOWN_FAULT: nsqd 127.0.0.1:"),
        (["add", "Bad-Kind"], "nsqbox fault add: INVALID_KIND"),
        (["add", "fail_publishes", "--node", "127.0.0.1:1"], "NODE_NOT_FOUND"),
        (["lift", "x", "--node", "127.0.0.1:1"], "INVALID_ID"),
        (["restart", "--node", "127.0.0.1:1"], "nsqbox fault restart: "),
    ],
)
def test_refusals_exit_1(
    box: BoxProcess, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    status, out, err = fault(box, capsys, *args)
    assert (status, out) == (1, "")
    assert message in err


def test_an_address_that_is_no_admin_service(
    box: BoxProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    for address in (box.ready["nsqd_http_address"], box.ready["lookupd_http_address"]):
        assert cli.main(["fault", "list", f"--admin-http-address={address}"]) == 1
        out, err = capsys.readouterr()
        assert out == ""
        assert (
            f"nsqbox fault list: NOT_FOUND - {address} has no /api/faults: not an nsqbox admin "
            "service (nsqbox up serves one on port 4171"
        ) in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no command"),
        (["explode"], "unknown command 'explode'"),
        (["add"], "add takes one fault kind"),
        (["lift"], "lift takes one fault id, or --all"),
        (["lift", "1", "--all"], "lift takes one fault id, or --all"),
        (["add", "x", "--param", "novalue"], "--param takes key=value"),
        (["list", "--admin-http-address=127.0.0.1:1"], "cannot reach the admin service"),
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    status = cli.main(["fault", *args])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    assert message in err


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fault", "--version"]) == 0
    assert re.fullmatch(r"nsqbox fault v1\.3\.0 \(built w/\S+\)\n", capsys.readouterr().out)
    assert cli.main(["fault", "-h"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("usage: nsqbox fault COMMAND [ARG] [flags]\n")
    for command in ("list", "add KIND", "lift ID", "lift --all", "restart|crash|start"):
        assert f"\n  {command} " in err, command
    assert "\nUsage of nsqbox fault:\n  -acl-http-header string\n" in err
    for kind in ("fail_publishes", "disk_full", "latency", "stall", "hide_producers"):
        assert kind in err, kind  # the kinds a node has, named


def test_a_flag_that_does_not_parse_exits_2_as_nsq_tools_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Go's flag package (nsqd, to_nsq, nsqbox pub...): the error, the usage, status 2."""
    assert cli.main(["fault", "add", "fail_publishes", "--duration", "abc"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith('invalid value "abc" for flag -duration: parse error\nusage: nsqbox')
    assert "\nUsage of nsqbox fault:\n" in err
    assert cli.main(["pub", "--bogus"]) == 2  # the other tools alike


async def test_restart_crash_start(nursery: trio.Nursery, tmp_path: Path) -> None:
    admin, node = await start_controlled(nursery, tmp_path)
    flags = fault_flag_set()

    async def run(*args: str) -> str:
        command = parse_command(flags, parse_args(flags, [*args, f"--admin-http-address={admin}"]))
        out = io.StringIO()
        async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
            await run_command(AdminFaults(client, command.admin), command, out)
        return out.getvalue()

    assert await run("crash", "--node", "0") == f"crash: nsqd {node} is down\n"
    listing = await run("list")
    assert f"node 0: nsqd {node} DOWN" in listing
    with pytest.raises(FaultError, match="NODE_CONTROL_FAILED: nsqd 0 is not running"):
        await run("crash", "--node", node)
    assert await run("start", "--node", node) == f"start: nsqd {node} is running\n"
    assert await run("restart", "--node", "0") == f"restart: nsqd {node} is running\n"
    assert await run("restart") == f"restart: nsqd {node} is running\n"  # the only nsqd
    assert f"node 0: nsqd {node} running" in await run("list")


def test_the_box_crashes_and_starts_its_nodes(
    box: BoxProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """``nsqbox up`` gives its admin service the box's node control."""
    node1 = box.ready["nsqd_http_addresses"][1]
    assert fault(box, capsys, "crash", "--node", "1")[:2] == (0, f"crash: nsqd {node1} is down\n")
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://{node1}/ping", timeout=TIMEOUT)
    status, out, _ = fault(box, capsys, "list")
    assert f"node 1: nsqd {node1} DOWN (crashed)\n" in out
    assert out.count(node1) == 1  # down, said once
    status, out, _ = fault(box, capsys, "list", "--json")
    [down] = [n for n in json.loads(out)["nodes"] if n["node"] == node1]
    assert down["error"] == "down (crashed)"
    for name in ("1", node1):
        status, _, err = fault(box, capsys, "add", "disk_full", "--node", name)
        assert status == 1
        assert "NODE_DOWN: nsqd 1 is down (crashed): start it first" in err
    status, _, err = fault(box, capsys, "crash", "--node", node1)
    assert status == 1
    assert "NODE_CONTROL_FAILED: nsqd 1 is crashed: nothing to crash" in err
    assert fault(box, capsys, "start", "--node", "1")[:2] == (
        0,
        f"start: nsqd {node1} is running\n",
    )
    assert pub(box, 1, "after-crash") == 200
    assert fault(box, capsys, "restart", "--node", node1)[:2] == (
        0,
        f"restart: nsqd {node1} is running\n",
    )
    assert pub(box, 1, "after-crash") == 200


def test_list_shows_control_characters_from_the_nodes(
    box: BoxProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    node0 = box.ready["nsqd_http_addresses"][0]
    agent = "ua\x1b]52;c;cGF5bG9hZA==\x07\x9b"  # OSC 52 and a C1 CSI, set on the node itself
    response = httpx.post(
        f"http://{node0}/nsqbox/faults/stall", params={"user_agent": agent}, timeout=TIMEOUT
    )
    response.raise_for_status()
    try:
        status, out, _ = fault(box, capsys, "list")
        assert status == 0
        assert "user_agent=ua\\x1b]52;c;cGF5bG9hZA==\\x07\\x9b" in out
        assert "\x1b" not in out
        assert "\x9b" not in out
    finally:
        assert fault(box, capsys, "lift", "--all")[0] == 0
