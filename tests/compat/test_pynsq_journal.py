"""pynsq giving up on a message (``max_tries``), as nsqbox's journal sees it (issue #33).

pynsq's Reader FINishes a message delivered more than ``max_tries`` times without handing
it to the handler (its ``giving_up``): the message is gone, and NSQ says nothing. The
journal lists it under ``/nsqbox/journal/given_up`` with its body, so it can be published
again.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import httpx
import pytest

from tests.compat.loop_wait import wait_for

nsq = pytest.importorskip("nsq")

TOPIC = "journal_topic"
CHANNEL = "journal_channel"
TIMEOUT = 20.0


def test_a_reader_with_max_tries_gives_up_and_the_journal_keeps_the_body(
    threaded_nsqd: Any, probe: Any
) -> None:
    tcp = threaded_nsqd.tcp_address
    http = f"http://{threaded_nsqd.http_address}"
    handled: list[int] = []

    def always_fails(message: nsq.Message) -> None:
        handled.append(message.attempts)
        message.requeue(backoff=False, delay=0)

    async def scenario() -> None:
        reader = nsq.Reader(
            topic=TOPIC,
            channel=CHANNEL,
            message_handler=always_fails,
            nsqd_tcp_addresses=[tcp],
            max_in_flight=1,
            max_tries=3,
            max_backoff_duration=0.1,
        )
        try:
            await wait_for(lambda: probe.channel_exists(TOPIC, CHANNEL), "SUB")
            async with httpx.AsyncClient() as client:
                response = await client.post(
                    f"{http}/pub", params={"topic": TOPIC}, content=b"poison pill"
                )
                assert response.status_code == 200
            await wait_for(lambda: probe.drained(TOPIC, CHANNEL), "the reader to give up")
        finally:
            reader.close()

    asyncio.run(scenario())
    assert handled == [1, 2, 3]  # the fourth delivery never reached the handler

    with httpx.Client(base_url=http, timeout=TIMEOUT) as client:
        given = client.get(
            "/nsqbox/journal/given_up", params={"topic": TOPIC, "channel": CHANNEL, "attempts": 4}
        ).json()
        [message] = given["messages"]
        assert (message["attempts"], message["requeues"], message["timeouts"]) == (4, 3, 0)
        assert base64.b64decode(message["body"]) == b"poison pill"
        assert message["finished_by"]["user_agent"].startswith("pynsq/")

        events = client.get("/nsqbox/journal", params={"id": message["id"]}).json()["events"]
        assert [e["kind"] for e in events] == [
            "published",  # the reader was ready: straight to it, never queued
            *["delivered", "requeued"] * 3,
            "delivered",
            "finished",
        ]
        assert events[0]["via"] == "HTTP"
        assert [e["attempt"] for e in events if e["kind"] == "delivered"] == [1, 2, 3, 4]
        assert events[-1]["attempt"] == 4

        # published again from what the journal kept
        again = client.post(
            "/pub", params={"topic": TOPIC}, content=base64.b64decode(message["body"])
        )
        assert again.status_code == 200
        published = client.get(
            "/nsqbox/journal", params={"topic": TOPIC, "kind": "published"}
        ).json()["events"]
        assert len(published) == 2
        assert published[1]["id"] != message["id"]
        assert published[1]["size"] == len(b"poison pill")
