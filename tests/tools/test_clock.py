"""``nsqbox clock`` and the admin service's ``/api/clock`` against real ``nsqbox up`` children.

One box with a manual clock and two nsqds (the box's nodes share one clock: one advance
moves them all), one with the real clock (which refuses to move).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from nsqbox import cli
from nsqbox.tools.clock import explain
from tests.tools.box_process import TIMEOUT, BoxProcess, admin_command, running_box


@pytest.fixture(scope="module")
def manual(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoxProcess]:
    yield from running_box(tmp_path_factory, "--nsqd-count=2", "--clock=manual")


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoxProcess]:
    yield from running_box(tmp_path_factory)


def clock(box: BoxProcess, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return admin_command(box, capsys, "clock", *args)


def _deferred(box: BoxProcess, index: int, topic: str) -> int:
    address = box.ready["nsqd_http_addresses"][index]
    doc = httpx.get(
        f"http://{address}/stats", params={"format": "json", "topic": topic}, timeout=TIMEOUT
    ).json()
    return sum(c["deferred_count"] for t in doc["topics"] for c in t["channels"])


def test_one_advance_moves_every_node_of_the_box(
    manual: BoxProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = clock(manual, capsys, "now", "--json")
    assert status == 0
    (shared,) = json.loads(out)["clocks"]  # the two nsqds and the lookupd: one clock
    assert shared["mode"] == "manual"
    assert len(shared["nodes"]) == 3
    for index in range(2):
        address = manual.ready["nsqd_http_addresses"][index]
        params = {"topic": "later", "defer": "3600000"}
        for path in ("topic", "channel"):
            created = httpx.post(
                f"http://{address}/{path}/create", params={"topic": "later", "channel": "c"}
            )
            assert created.status_code == 200, created.text
        answer = httpx.post(f"http://{address}/pub", params=params, content=b"m", timeout=TIMEOUT)
        assert answer.status_code == 200, answer.text
    assert [_deferred(manual, i, "later") for i in range(2)] == [1, 1]

    status, out, err = clock(manual, capsys, "advance", "1h")
    assert status == 0, err
    assert "manual" in out
    assert "2 fired" in out
    assert "1h0m0s ahead" in out  # a Go duration, as the span was given
    assert [_deferred(manual, i, "later") for i in range(2)] == [0, 0]
    status, out, _ = clock(manual, capsys, "now", "--json")
    assert json.loads(out)["clocks"][0]["offset"] >= 3600


def test_a_bad_span_is_refused(manual: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = clock(manual, capsys, "later")
    assert status == 1
    assert "usage: nsqbox clock" in err


@pytest.mark.parametrize(
    ("span", "sentence"),
    [
        ("abc", "'abc' is not a span of time: give seconds (90, 1.5) or a Go duration"),
        ("9000h", "cannot advance by 9000h: over the cap of one advance (8784h0m0s)"),
        ("-5s", "cannot advance by -5s: broker time only moves forward (above 0)"),
        ("0", "cannot advance by 0: broker time only moves forward (above 0)"),
        ("nan", "'nan' is not a span of time: give a finite number of seconds"),
    ],
)
def test_each_bad_span_gets_its_own_sentence(
    capsys: pytest.CaptureFixture[str], span: str, sentence: str
) -> None:
    # Checked before sending: nothing listens on port 1, and none of these gets that far.
    status = cli.main(["clock", "advance", span, "--admin-http-address=127.0.0.1:1"])
    _, err = capsys.readouterr()
    assert status == 1
    assert sentence in err


@pytest.mark.parametrize(
    "argv",
    [
        ["advance", "-5s"],
        ["advance", "-5s", "--json"],
        ["--json", "advance", "-90"],
        ["advance", "--json", "-5s"],
        ["advance", "--", "-5s"],
    ],
)
def test_a_negative_span_is_the_argument_not_a_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    status = cli.main(["clock", *argv])
    _, err = capsys.readouterr()
    assert status == 1
    assert "broker time only moves forward" in err
    assert "flag provided but not defined" not in err


def test_help_lists_the_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["clock", "-h"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("usage: nsqbox clock COMMAND [flags]\n  now ")
    assert "\n  advance DURATION " in err
    assert "Usage of nsqbox clock:" in err


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        ([], "no command"),
        (["advance"], "advance takes a span of time (1h, 90)"),
        (["advance", "1h", "extra"], "unexpected argument 'extra'"),
        (["now", "extra"], "unexpected argument 'extra'"),
        (["stop"], "unknown command 'stop'"),
    ],
)
def test_a_command_line_that_makes_no_sense_says_why(
    argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # refused before any request: the admin address is never reached
    assert cli.main(["clock", "--admin-http-address=127.0.0.1:1", *argv]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0].endswith(f" {reason}"), err
    assert "usage: nsqbox clock COMMAND" in err


@pytest.mark.parametrize(
    ("code", "sentence"),
    [
        ("CLOCK_NOT_MANUAL", "only a box started with 'nsqbox up --clock manual' can be moved"),
        ("INVALID_BY", "the admin service refused the span"),
        ("MISSING_ARG_BY", "advance needs a span of time"),
        ("FORBIDDEN", "only lets its admin users move time: pass --user"),
        ("OFFSET_LIMIT", "at most ten years in all"),
        ("NOT_FOUND", "or it runs with --auth-http-address, which turns nsqbox's own routes off"),
        ("UPSTREAM_ERROR: boom", "no node answered the admin service"),
    ],
)
def test_every_server_code_has_a_sentence(code: str, sentence: str) -> None:
    assert sentence in explain(code)
    assert explain(code).endswith(f"[{code}]")


def test_the_real_clock_does_not_move(real: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = clock(real, capsys, "now")
    assert status == 0
    assert "(real)" in out
    status, _, err = clock(real, capsys, "advance", "1h")
    assert status == 1
    assert err.strip().endswith(f"{explain('CLOCK_NOT_MANUAL')}")
    assert "can be moved" in err
    nsqd = real.ready["nsqd_http_address"]
    answer = httpx.post(f"http://{nsqd}/nsqbox/clock/advance", params={"by": "1h"})
    assert (answer.status_code, answer.json()["message"]) == (409, "CLOCK_NOT_MANUAL")
