"""nsqlookupd's faults on demand and its ``/nsqbox/faults`` routes, over real sockets.

A raw V1 connection registers a producer as an nsqd would; the routes are driven
with httpx. Durations run on trio's autojump clock (the server's clock too).
"""

from __future__ import annotations

import httpx
import pytest
import trio
import trio.testing

from nsqbox.wire.lookupd import encode_register

from .lookupd_helpers import RunningLookupd, open_lookupd, open_v1

OK = b"OK"


async def _producers(lookupd: RunningLookupd, topic: str = "orders") -> list[str]:
    lookup = await lookupd.get("/lookup", topic=topic)
    return [p["broadcast_address"] for p in lookup["producers"]]


async def _post(lookupd: RunningLookupd, path: str, **params: str) -> dict[str, object]:
    response = await lookupd.http.post(path, params=params)
    assert response.status_code == 200, response.text
    doc: dict[str, object] = response.json()
    return doc


async def test_hide_producers_answers_as_if_there_were_none() -> None:
    async with open_lookupd() as lookupd, open_v1(lookupd) as conn:
        await conn.identify()
        assert await conn.command(encode_register("orders", "work")) == OK
        assert await conn.command(encode_register("audit", "")) == OK
        fault = await _post(lookupd, "/nsqbox/faults/hide_producers", topic="orders")
        assert (fault["kind"], fault["topic"], fault["remaining"]) == (
            "hide_producers",
            "orders",
            None,
        )
        # the topic and its channels are known; its producers are not listed
        assert await lookupd.get("/lookup", topic="orders") == {
            "channels": ["work"],
            "producers": [],
        }
        assert await _producers(lookupd, "audit") == ["10.0.0.1"]
        assert await lookupd.get("/nsqbox/faults") == {"faults": [fault]}
        lifted = await lookupd.http.delete(f"/nsqbox/faults/{fault['id']}")
        assert lifted.json() == {"lifted": True}
        assert await _producers(lookupd) == ["10.0.0.1"]
        # every topic, for a time
        await _post(lookupd, "/nsqbox/faults/hide_producers", duration="30")
        assert (await _producers(lookupd), await _producers(lookupd, "audit")) == ([], [])
        assert (await lookupd.http.delete("/nsqbox/faults")).json() == {"lifted": 1}
        assert await _producers(lookupd, "audit") == ["10.0.0.1"]


async def test_lookupd_down_silences_the_api_but_not_the_fault_routes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_lookupd() as lookupd, open_v1(lookupd) as conn:
        await conn.identify()
        assert await conn.command(encode_register("orders", "")) == OK
        fault = await _post(lookupd, "/nsqbox/faults/lookupd_down")
        with pytest.raises(httpx.ReadTimeout):  # no answer at all, the client gives up
            await lookupd.http.get("/ping")
        # the registrations go on; the fault routes answer
        assert await conn.command(encode_register("audit", "")) == OK
        assert [f["kind"] for f in (await lookupd.get("/nsqbox/faults"))["faults"]] == [
            "lookupd_down"
        ]
        async with trio.open_nursery() as nursery:
            answers: list[int] = []

            async def ping() -> None:
                answers.append((await lookupd.http.get("/ping")).status_code)

            nursery.start_soon(ping)
            await trio.testing.wait_all_tasks_blocked()
            assert answers == []  # still waiting
            await lookupd.http.delete(f"/nsqbox/faults/{fault['id']}")
        assert answers == [200]  # the waiting request is answered once it is lifted
        assert await _producers(lookupd, "audit") == ["10.0.0.1"]


async def test_lookupd_down_for_a_time_ends_by_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_lookupd() as lookupd:
        await _post(lookupd, "/nsqbox/faults/lookupd_down", duration="3")
        started = trio.current_time()
        assert (await lookupd.http.get("/ping")).text == "OK"  # the client's 5 s are enough
        assert trio.current_time() - started >= 3.0
        assert await lookupd.get("/nsqbox/faults") == {"faults": []}


async def test_durations_in_seconds_or_go_style() -> None:
    async with open_lookupd() as lookupd:
        for duration, seconds in (("2m", 120), ("1.5s", 1.5), ("500ms", 0.5), ("30", 30)):
            hidden = await _post(lookupd, "/nsqbox/faults/hide_producers", duration=duration)
            assert hidden["until"] == pytest.approx(float(hidden["since"]) + seconds)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "params", "message"),
    [
        ("/nsqbox/faults/hide_producers", {"topic": "a/b"}, "INVALID_TOPIC"),
        ("/nsqbox/faults/hide_producers", {"duration": "0"}, "INVALID_DURATION"),
        ("/nsqbox/faults/lookupd_down", {"duration": "inf"}, "INVALID_DURATION"),
        ("/nsqbox/faults/lookupd_down", {"duration": "2 m"}, "INVALID_DURATION"),
        ("/nsqbox/faults/hide_producers", {"duration": "-2m"}, "INVALID_DURATION"),
    ],
)
async def test_bad_parameters_get_400(path: str, params: dict[str, str], message: str) -> None:
    async with open_lookupd() as lookupd:
        answer = await lookupd.http.post(path, params=params)
        assert (answer.status_code, answer.json()) == (400, {"message": message})
        assert await lookupd.get("/nsqbox/faults") == {"faults": []}


async def test_a_request_waits_for_the_last_down_fault_to_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_lookupd() as lookupd:
        forever = await _post(lookupd, "/nsqbox/faults/lookupd_down")
        await _post(lookupd, "/nsqbox/faults/lookupd_down", duration="4")
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            answered: list[float] = []

            async def ping() -> None:
                assert (await lookupd.http.get("/ping")).text == "OK"
                answered.append(trio.current_time() - started)

            nursery.start_soon(ping)
            await trio.sleep(1)
            await lookupd.http.delete(f"/nsqbox/faults/{forever['id']}")  # one left, for 3 s
        assert 4.0 <= answered[0] < 5.0
