"""Faults are bounded (issue #37, "Bounds"): a duration or delay of at most a day, written
in ASCII digits, and at most 64 faults in force per node; through real HTTP on nsqd,
nsqlookupd and the admin's ``/api/faults``."""

from __future__ import annotations

import pytest

from nsqbox.broker.faults import MAX_FAULTS

from .conftest import Box

#: "12" in Arabic-Indic digits: int() and float() read it, Go's strconv does not.
ARABIC_12 = "\u0661\u0662"

REFUSED = ["1e300", "inf", "nan", "-1", "-1s", "86401", "25h", ARABIC_12, "1 ", "infinity"]


@pytest.mark.parametrize("duration", REFUSED)
async def test_a_duration_past_a_day_or_not_a_number_is_refused(box: Box, duration: str) -> None:
    for url in (
        f"{box.nsqd}/nsqbox/faults/fail_publishes",
        f"{box.lookupd}/nsqbox/faults/hide_producers",
        f"{box.admin}/api/faults/fail_publishes",
    ):
        answer = await box.client.post(url, params={"duration": duration})
        assert (answer.status_code, answer.json()) == (400, {"message": "INVALID_DURATION"}), url
    for name in ("delay", "jitter"):
        params = {"delay": "0.1", name: duration}
        answer = await box.client.post(f"{box.nsqd}/nsqbox/faults/latency", params=params)
        assert (answer.status_code, answer.json()) == (400, {"message": f"INVALID_{name.upper()}"})
    listing = await box.client.get(f"{box.nsqd}/nsqbox/faults")
    assert listing.json() == {"faults": []}


async def test_a_day_is_the_longest_fault(box: Box) -> None:
    url = f"{box.nsqd}/nsqbox/faults/fail_publishes"
    answer = await box.client.post(url, params={"duration": "24h"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["left"] == 86400


@pytest.mark.parametrize("count", [ARABIC_12, "1_0", "+1", "0", "99999999999999999999", "\u00b2"])
async def test_a_count_in_other_digits_is_refused(box: Box, count: str) -> None:
    url = f"{box.nsqd}/nsqbox/faults/fail_publishes"
    answer = await box.client.post(url, params={"count": count})
    assert (answer.status_code, answer.json()) == (400, {"message": "INVALID_COUNT"})
    for fault_id in {count, "\u0663"} - {"0"}:  # 0 is an id no fault has: lifted false
        answer = await box.client.delete(f"{box.nsqd}/nsqbox/faults/{fault_id}")
        assert (answer.status_code, answer.json()) == (400, {"message": "INVALID_ID"})


async def test_at_most_64_faults_per_node(box: Box) -> None:
    for base, kind in (
        (f"{box.nsqd}/nsqbox/faults", "fail_publishes"),
        (f"{box.lookupd}/nsqbox/faults", "hide_producers"),
    ):
        for i in range(MAX_FAULTS):
            answer = await box.client.post(f"{base}/{kind}", params={"topic": f"t{i}"})
            assert answer.status_code == 200, answer.text
        answer = await box.client.post(f"{base}/{kind}", params={"topic": "one-more"})
        assert (answer.status_code, answer.json()) == (409, {"message": "TOO_MANY_FAULTS"})
        listing = (await box.client.get(base)).json()["faults"]
        assert len(listing) == MAX_FAULTS
        # lifting one makes room for one
        answer = await box.client.delete(f"{base}/{listing[0]['id']}")
        assert answer.json() == {"lifted": True}
        answer = await box.client.post(f"{base}/{kind}", params={"topic": "one-more"})
        assert answer.status_code == 200, answer.text
    # the admin passes the node's refusal on
    answer = await box.client.post(f"{box.admin}/api/faults/stall")
    assert (answer.status_code, answer.json()) == (409, {"message": "TOO_MANY_FAULTS"})
