"""A capture survives a restart and a crash of its nsqd, in every mode (#36).

The plugin's handle in a generated suite (pytester) in thread and subprocess modes, the
trio handle in trio mode; then the ``/nsqbox/tap`` routes themselves across an
in-process restart (what ``nsqbox up``'s admin restart does), and the files that
keep them (a record cut short, a file whose write failed). Real servers on
127.0.0.1 port 0.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from nsqbox.nsqd.tap_file import (
    append_records,
    create_tap_file,
    load_tap_file,
    tap_file_ids,
    tap_file_path,
)
from nsqbox.testing import NSQBox, ThreadBox
from nsqbox.testing.remote import NSQHTTPError, http

from .conftest import run_generated

pytest_plugins = ["pytester"]

ACROSS = """
def test_a_capture_across_a_restart(nsqbox):
    with nsqbox.capture("orders") as published:
        nsqbox.publish("orders", b"before")
        assert published.wait_for(1) == [b"before"]  # read before the restart
        nsqbox.publish("orders", b"unread")  # published, not read before it
        nsqbox.faults.restart()
        nsqbox.publish("orders", b"after")
        assert published.wait_for(3) == [b"before", b"unread", b"after"]
    assert published.bodies == [b"before", b"unread", b"after"]
    assert not published.lost


def test_a_capture_across_a_crash(nsqbox):
    with nsqbox.capture("orders") as published:
        nsqbox.publish("orders", b"before")
        assert published.wait_for(1) == [b"before"]
        nsqbox.publish("orders", b"unread")  # memory queue only: the crash drops the message
        nsqbox.faults.crash()
        nsqbox.faults.start()
        nsqbox.publish("orders", b"after")
    assert published.bodies == [b"before", b"unread", b"after"]
    assert not published.lost
    # what the crash did to the topic is nsqd's business: the memory queue is gone
    assert nsqbox.consume("orders", "app") == [b"after"]
"""

DOWN_AT_THE_END = """
def test_a_capture_that_ends_while_its_node_is_down_says_so(nsqbox):
    with nsqbox.capture("orders") as published:
        nsqbox.publish("orders", b"read")
        assert published.wait_for(1) == [b"read"]
        nsqbox.publish("orders", b"unread")
        nsqbox.faults.crash()
    assert published.bodies == {expected}
    assert published.lost is {lost}
    nsqbox.faults.start()
"""


def test_thread_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_across=ACROSS)
    down = DOWN_AT_THE_END.format(expected=[b"read", b"unread"], lost=False)
    pytester.makepyfile(test_down=down)  # in the process: the tap recorded both at once
    run_generated(pytester).assert_outcomes(passed=3)


def test_subprocess_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_across=ACROSS)
    down = DOWN_AT_THE_END.format(expected=[b"read"], lost=True)
    pytester.makepyfile(test_down=down)  # the unread record is on the node's disk
    result = run_generated(pytester, "--nsqbox-mode=subprocess", "--nsqbox-start-timeout=30")
    result.assert_outcomes(passed=3)


def test_trio_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_trio="""
        async def test_a_capture_across_a_restart(nsqbox_trio):
            with nsqbox_trio.capture("orders") as published:
                await nsqbox_trio.publish("orders", b"before")
                await nsqbox_trio.faults.restart()
                await nsqbox_trio.publish("orders", b"after")
                assert await published.await_for(2) == [b"before", b"after"]
            assert published.bodies == [b"before", b"after"]
            assert not published.lost

        async def test_a_capture_across_a_crash(nsqbox_trio):
            with nsqbox_trio.capture("orders") as published:
                await nsqbox_trio.publish("orders", b"before")
                await nsqbox_trio.faults.crash(restart=True)
                await nsqbox_trio.publish("orders", b"after")
            assert published.bodies == [b"before", b"after"]
            assert not published.lost
        """
    )
    run_generated(pytester).assert_outcomes(passed=2)


# -- the routes across an in-process restart (nsqbox up's admin restart) ----------------


def _read(handle: NSQBox, tap_id: str, start: int = 0) -> dict[str, object]:
    params = {"id": tap_id, "from": str(start)}
    doc: dict[str, object] = json.loads(
        http("GET", handle.nsqd_http_address, "/nsqbox/tap/read", params)
    )
    return doc


def _bodies(doc: dict[str, object]) -> list[bytes]:
    messages = doc["messages"]
    assert isinstance(messages, list)
    return [base64.b64decode(m["body"]) for m in messages]


def test_a_tap_comes_back_with_its_id_after_a_restart_and_a_crash(
    handle: NSQBox, thread_box: ThreadBox
) -> None:
    address = handle.nsqd_http_address
    tap_id = json.loads(http("POST", address, "/nsqbox/tap/open", {"topic": "t"}))["id"]
    assert len(tap_id) == 16
    handle.publish("t", b"1")
    handle.restart_nsqd()
    handle.publish("t", b"2")
    handle.faults.crash(restart=True)
    handle.publish("t", b"3")
    doc = _read(handle, tap_id, 1)
    assert (_bodies(doc), doc["next"], doc["lost"]) == ([b"2", b"3"], 3, False)
    data_path = thread_box.call(lambda: thread_box.cluster.node(0).data_path)
    assert tap_file_ids(data_path) == [(tap_id, False)]
    http("POST", address, "/nsqbox/tap/close", {"id": tap_id})
    assert tap_file_ids(data_path) == []  # closing removes its file
    handle.restart_nsqd()
    with pytest.raises(NSQHTTPError, match="TAP_NOT_FOUND"):
        _read(handle, tap_id)


# -- the files -------------------------------------------------------------------------


def test_a_record_cut_short_loads_up_to_it_and_says_lost(tmp_path: Path) -> None:
    path = tap_file_path(str(tmp_path), "0123456789abcdef")
    create_tap_file(path, "orders")
    append_records(path, [("0" * 16, 1, 0, b"whole", None), ("1" * 16, 2, 500, b"cut", None)])
    os.truncate(path, os.path.getsize(path) - 1)
    loaded = load_tap_file(path, limit=1 << 20)
    assert loaded is not None
    assert (loaded.topic, loaded.records, loaded.lost) == (
        "orders",
        [("0" * 16, 1, 0, b"whole", None)],
        True,
    )


def test_a_file_is_read_no_further_than_the_budget(tmp_path: Path) -> None:
    path = tap_file_path(str(tmp_path), "0123456789abcdef")
    create_tap_file(path, "orders")
    append_records(path, [("0" * 16, 1, 0, b"a" * 100, None), ("1" * 16, 2, 0, b"b" * 100, None)])
    loaded = load_tap_file(path, limit=200)
    assert loaded is not None
    assert ([r[3] for r in loaded.records], loaded.overflow, loaded.lost) == (
        [b"a" * 100],
        True,
        False,
    )


def test_records_keep_their_publisher_and_old_files_load(tmp_path: Path) -> None:
    path = tap_file_path(str(tmp_path), "0123456789abcdef")
    create_tap_file(path, "orders")
    tcp = {"protocol": "tcp", "client_id": "billing-7", "user_agent": "go-nsq/1.1.0"}
    append_records(path, [("0" * 16, 1, 0, b"a", tcp), ("1" * 16, 2, 0, b"b", None)])
    loaded = load_tap_file(path, limit=1 << 20)
    assert loaded is not None
    assert [(r[3], r[4]) for r in loaded.records] == [(b"a", tcp), (b"b", None)]
    assert not loaded.lost
    # a file an nsqbox before publishers wrote: its header, records without the field
    old = tap_file_path(str(tmp_path), "fedcba9876543210")
    Path(old).write_bytes(
        b"NSQBOXTAP1\norders\n"
        + b"0" * 16
        + (5).to_bytes(8, "big")
        + (0).to_bytes(8, "big")
        + (3).to_bytes(4, "big")
        + b"old"
    )
    loaded = load_tap_file(old, limit=1 << 20)
    assert loaded is not None
    assert (loaded.topic, loaded.records, loaded.lost) == (
        "orders",
        [("0" * 16, 5, 0, b"old", None)],
        False,
    )


def test_files_that_are_not_taps_are_left_alone(handle: NSQBox, thread_box: ThreadBox) -> None:
    data_path = thread_box.call(lambda: thread_box.cluster.node(0).data_path)
    odd = Path(data_path) / "nsqbox.tap.0123456789abcdef.dat"
    odd.write_bytes(b"not a tap")
    try:
        handle.restart_nsqd()
        with pytest.raises(NSQHTTPError, match="TAP_NOT_FOUND"):
            _read(handle, "0123456789abcdef")
        assert odd.read_bytes() == b"not a tap"
    finally:
        odd.unlink()


def test_a_tap_whose_file_was_marked_lost_comes_back_saying_so(
    handle: NSQBox, thread_box: ThreadBox
) -> None:
    address = handle.nsqd_http_address
    tap_id = json.loads(http("POST", address, "/nsqbox/tap/open", {"topic": "t"}))["id"]
    handle.publish("t", b"1")
    data_path = thread_box.call(lambda: thread_box.cluster.node(0).data_path)
    # what the tap does when a write fails: the file's name says records stop there
    os.rename(tap_file_path(data_path, tap_id), tap_file_path(data_path, tap_id, lost=True))
    handle.faults.crash(restart=True)
    doc = _read(handle, tap_id)
    assert (_bodies(doc), doc["lost"]) == ([b"1"], True)
    http("POST", address, "/nsqbox/tap/close", {"id": tap_id})
    assert tap_file_ids(data_path) == []


def test_a_tap_whose_write_fails_says_it_may_lose_records(
    handle: NSQBox, thread_box: ThreadBox
) -> None:
    address = handle.nsqd_http_address
    tap_id = json.loads(http("POST", address, "/nsqbox/tap/open", {"topic": "t"}))["id"]
    data_path = thread_box.call(lambda: thread_box.cluster.node(0).data_path)
    path = Path(tap_file_path(data_path, tap_id))
    lost_path = Path(tap_file_path(data_path, tap_id, lost=True))
    path.unlink()
    path.mkdir()  # the next append fails (IsADirectoryError), as a full or broken disk would
    try:
        handle.publish("t", [b"1", b"2"])
        doc = _read(handle, tap_id)
        assert (_bodies(doc), doc["lost"]) == ([b"1", b"2"], True)  # in memory still
        assert (path.exists(), lost_path.is_dir()) == (False, True)  # renamed: "lost"
        http("POST", address, "/nsqbox/tap/close", {"id": tap_id})
    finally:
        for leftover in (path, lost_path):
            if leftover.is_dir():
                leftover.rmdir()
