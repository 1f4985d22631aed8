"""``nsqbox clock`` and the admin service's ``/api/clock`` against real ``nsqbox up`` children.

One box with a manual clock and two nsqds (the box's nodes share one clock: one advance
moves them all), one with the real clock (which refuses to move).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

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
    assert [_deferred(manual, i, "later") for i in range(2)] == [0, 0]
    status, out, _ = clock(manual, capsys, "now", "--json")
    assert json.loads(out)["clocks"][0]["offset"] >= 3600


def test_a_bad_span_is_refused(manual: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = clock(manual, capsys, "advance", "soon")
    assert (status, err.strip().endswith("INVALID_BY")) == (1, True)
    status, _, err = clock(manual, capsys, "later")
    assert status == 1
    assert "usage: nsqbox clock" in err


def test_the_real_clock_does_not_move(real: BoxProcess, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = clock(real, capsys, "now")
    assert status == 0
    assert "(real)" in out
    status, _, err = clock(real, capsys, "advance", "1h")
    assert status == 1
    assert err.strip().endswith("CLOCK_NOT_MANUAL")
    nsqd = real.ready["nsqd_http_address"]
    answer = httpx.post(f"http://{nsqd}/nsqbox/clock/advance", params={"by": "1h"})
    assert (answer.status_code, answer.json()["message"]) == (409, "CLOCK_NOT_MANUAL")
