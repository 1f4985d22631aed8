"""Numbers from a request are read as Go reads them (issue #37, "Bounds"): ASCII digits
only, within bounds. Python's ``int()``/``float()`` take ``'\u0661\u0662'`` (Arabic-Indic digits),
``'1_000'``, spaces and thousands of digits; a huge or foreign number now answers the
route's 400 instead of a 500, through real HTTP."""

from __future__ import annotations

import pytest

from .conftest import Box

#: "12" in Arabic-Indic digits: int() and float() read it, Go's strconv does not.
ARABIC_12 = "\u0661\u0662"

# nsqd v1.3.0's answers to /pub?topic=t&defer=..., as the real binary gave them:
# strconv.ParseInt(s, 10, 64), then time.Duration(ms) * time.Millisecond, which wraps
# around int64 (so one huge value lands inside --max-req-timeout and is accepted).
REAL_NSQD_DEFER = [
    (ARABIC_12, 400),
    ("1_000", 400),
    ("99999999999999999999999", 400),
    ("18446744073709551", 400),  # wraps to a negative duration
    ("9223372036854775807", 400),
    ("3600001", 400),  # past --max-req-timeout (1h)
    ("+5", 200),
    ("-0", 200),
    ("3600000", 200),
    ("9223372036854776", 200),  # wraps to a small positive duration
    ("99151249396188840", 200),  # wraps to 64 µs
]


@pytest.mark.parametrize(("defer", "status"), REAL_NSQD_DEFER)
async def test_pub_defer_answers_as_real_nsqd(box: Box, defer: str, status: int) -> None:
    url = f"{box.nsqd}/pub"
    answer = await box.client.post(url, params={"topic": "t", "defer": defer}, content=b"x")
    expected = b"OK" if status == 200 else b'{"message":"INVALID_DEFER"}'
    assert (answer.status_code, answer.content) == (status, expected)


@pytest.mark.parametrize(
    ("path", "params", "code"),
    [
        ("/nsqbox/peek", {"cursor": "99999999999999999999999"}, "INVALID_CURSOR"),
        ("/nsqbox/peek", {"cursor": "memory:99999999999999999999"}, "INVALID_CURSOR"),
        ("/nsqbox/peek", {"cursor": "disk:\u0661:2"}, "INVALID_CURSOR"),
        ("/nsqbox/peek", {"cursor": "memory:1_0"}, "INVALID_CURSOR"),
        ("/nsqbox/peek", {"limit": ARABIC_12}, "INVALID_LIMIT"),
        ("/nsqbox/peek", {"limit": "9" * 5000}, "INVALID_LIMIT"),
        ("/nsqbox/peek", {"body_bytes": "\u00b2"}, "INVALID_BODY_BYTES"),
    ],
)
async def test_nsqbox_routes_refuse_foreign_or_huge_numbers(
    box: Box, path: str, params: dict[str, str], code: str
) -> None:
    created = await box.client.post(f"{box.nsqd}/topic/create", params={"topic": "t"})
    assert created.status_code == 200
    answer = await box.client.get(f"{box.nsqd}{path}", params={"topic": "t", **params})
    assert (answer.status_code, answer.json()) == (400, {"message": code})


async def test_a_cursor_at_int64s_end_is_a_position_like_any(box: Box) -> None:
    # mem-queue-size 2: the rest of the five go to the disk queue
    bodies = b"a\nb\nc\nd\ne"
    answer = await box.client.post(f"{box.nsqd}/mpub", params={"topic": "t"}, content=bodies)
    assert answer.status_code == 200
    most = str((1 << 63) - 1)
    for cursor in (f"disk:{most}:{most}", f"disk:0:{most}", f"memory:{most}"):
        answer = await box.client.get(
            f"{box.nsqd}/nsqbox/peek", params={"topic": "t", "cursor": cursor}
        )
        assert answer.status_code == 200, (cursor, answer.text)
        assert answer.json()["depth"] == 5


async def test_tap_from_and_admin_limits_and_clock_spans(box: Box) -> None:
    opened = await box.client.post(f"{box.nsqd}/nsqbox/tap/open", params={"topic": "t"})
    assert opened.status_code == 200, opened.text
    tap = opened.json()["id"]
    for start in (ARABIC_12, "99999999999999999999999", "-1"):
        answer = await box.client.get(
            f"{box.nsqd}/nsqbox/tap/read", params={"id": str(tap), "from": start}
        )
        assert (answer.status_code, answer.json()) == (400, {"message": "INVALID_FROM"})
    for name, code in (("limit", "INVALID_LIMIT"), ("body_bytes", "INVALID_BODY_BYTES")):
        for value in (ARABIC_12, "9" * 5000):
            answer = await box.client.get(f"{box.admin}/api/messages/t", params={name: value})
            assert (answer.status_code, answer.json()) == (400, {"message": code})
    answer = await box.client.post(f"{box.admin}/api/faults/restart", params={"node": "9" * 5000})
    assert answer.status_code in (404, 501), answer.text
    answer = await box.client.post(f"{box.nsqd}/nsqbox/clock/advance", params={"by": ARABIC_12})
    assert (answer.status_code, answer.json()) == (400, {"message": "INVALID_BY"})
