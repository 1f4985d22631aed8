"""The Journey and Troubles views against a real cluster (two nsqds and a lookupd).

A consumer requeues, finishes and gives up on messages over real sockets; the views must
show what the nodes' journals recorded, with the consumer's user agent, and text from the
wire (a user agent with a control character, bodies that look like markup) as text.
Republishing a given-up message is checked by consuming the copy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from textual.pilot import Pilot
from textual.widgets import Static

from nsqbox.admin.journal import NOT_SUPPORTED
from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.channel import ChannelScreen
from nsqbox.admin.tui.journey import JourneyScreen
from nsqbox.admin.tui.message import MessageScreen
from nsqbox.admin.tui.message_actions import RepublishScreen
from nsqbox.admin.tui.modals import ConfirmScreen
from nsqbox.admin.tui.navigation import OpenChannel, OpenJourney
from nsqbox.admin.tui.troubles import TroublesScreen
from nsqbox.admin.tui.widgets import StatsTable
from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer
from nsqbox.testing.handle import NSQBox
from nsqbox.testing.waiting import poll

from .conftest import HTTP, TIMEOUT, make_app, run_app, wait_until
from .test_messages import create_channel, listed, listed_on_real_nsqd, open_messages, real_nsqd_app

#: Journey columns: node, kind, channel, client, attempt, details.
NODE, KIND, CHANNEL, CLIENT, ATTEMPT, DETAILS = 2, 3, 4, 5, 6, 7
#: A user agent with an escape sequence in it: it must reach the terminal as text.
AGENT = "agent\x1b[31m-x"


def column(table: StatsTable, index: int) -> list[str]:
    return [table.cells(key)[index] for key in table.keys]


async def channel_seen(pilot: Pilot[Any], app: AdminApp, topic: str) -> None:
    """Wait until the app sees channel c of ``topic``."""
    await wait_until(
        pilot,
        lambda: app.snapshot is not None and app.snapshot.channel(topic, "c") is not None,
        f"channel c of {topic}",
    )


async def troubles_of(pilot: Pilot[Any], app: AdminApp) -> TroublesScreen:
    """Wait until the Troubles view has read its lists; the view."""
    await wait_until(pilot, lambda: isinstance(app.screen, TroublesScreen), "troubles")
    screen = app.screen
    assert isinstance(screen, TroublesScreen)
    await wait_until(pilot, lambda: screen.loads > 0, "the lists read")
    return screen


async def journey_of(pilot: Pilot[Any], app: AdminApp) -> JourneyScreen:
    await wait_until(pilot, lambda: isinstance(app.screen, JourneyScreen), "the Journey view")
    screen = app.screen
    assert isinstance(screen, JourneyScreen)
    await wait_until(pilot, lambda: screen.loads > 0, "the journey read")
    await pilot.pause()
    return screen


def test_a_message_journey_from_the_messages_view(nsq: NSQBox) -> None:
    create_channel(nsq, "trip", "c")
    nsq.publish("trip", b"the body")
    config = Config(max_in_flight=1, user_agent=AGENT)
    with BlockingConsumer(nsq.addresses.nsqd_tcp[0], "trip", "c", config=config) as consumer:
        messages = consumer.messages(timeout=TIMEOUT)
        first = next(messages)
        first.requeue(0, backoff=False)
        again = next(messages)  # in flight, attempt 2, while the view lists it
        assert (again.id, again.attempts) == (first.id, 2)

        async def body(pilot: Pilot[Any], app: AdminApp) -> None:
            await open_messages(pilot, app, "trip", "c")
            screen = await listed(pilot, app)
            assert [m.id for m in screen.messages] == [first.id.decode()]
            await wait_until(pilot, lambda: screen.selected is not None, "the message selected")
            assert screen.check_action("journey", ()) is True
            await pilot.press("j")
            journey = await journey_of(pilot, app)
            assert journey.msg_id == first.id.decode()
            table = journey.main_table
            kinds = column(table, KIND)
            assert [k for k in kinds if k != "queued"] == [
                "published",
                "delivered",
                "requeued",
                "delivered",
            ]
            node = nsq.nsqd_http_addresses[0]
            assert set(column(table, NODE)) == {str(node)}
            delivered = [i for i, k in enumerate(kinds) if k == "delivered"]
            assert [column(table, ATTEMPT)[i] for i in delivered] == ["1", "2"]
            clients = [column(table, CLIENT)[i] for i in delivered]
            assert all(c.startswith("agent\\x1b[31m-x (127.0.0.1:") for c in clients), clients
            assert not any("\x1b" in cell for key in table.keys for cell in table.cells(key))
            assert journey.reports
            assert all(r.supported for r in journey.reports)
            await pilot.press("escape")
            assert app.screen is screen
            # the same from the message opened
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, MessageScreen), "a message")
            await pilot.press("j")
            opened = await journey_of(pilot, app)
            assert opened is not journey
            assert column(opened.main_table, KIND) == kinds

        run_app(make_app(nsq), body)
        again.finish()


def _play(nsq: NSQBox, topic: str) -> None:
    """Give up on ``give [red]up[/red]`` at attempt 2 and leave ``keep trying`` requeued
    for a minute: one given-up message and one in trouble, in channel c of ``topic``.

    Each test has a topic of its own: a node's given-up list is history, kept after the
    topic is deleted (the handle deletes every topic after each test).
    """
    create_channel(nsq, topic, "c")
    nsq.publish(topic, [b"give [red]up[/red]", b"keep trying"])
    config = Config(max_in_flight=1, user_agent="the-worker")
    with BlockingConsumer(nsq.addresses.nsqd_tcp[0], topic, "c", config=config) as consumer:
        gave_up = requeued = False
        for message in consumer.messages(timeout=TIMEOUT):
            if message.body == b"keep trying":
                message.requeue(60, backoff=False)
                requeued = True
            elif message.attempts == 1:
                message.requeue(0, backoff=False)
            else:
                message.finish()
                gave_up = True
            if gave_up and requeued:
                break
    # the FIN and the REQ were sent, maybe not yet handled: wait until the node has both
    address = nsq.nsqd_http_addresses[0]
    params = {"topic": topic, "channel": "c"}

    def recorded() -> tuple[bool, tuple[int, int]]:
        with httpx.Client(timeout=TIMEOUT, trust_env=False) as client:
            base = f"http://{address}/nsqbox/journal"
            given = client.get(f"{base}/given_up", params=params).json()["messages"]
            troubled = client.get(f"{base}/troubles", params=params).json()["count"]
        return (len(given), troubled) == (1, 1), (len(given), troubled)

    poll(recorded, TIMEOUT, lambda seen: f"given up, in trouble: {seen}")


def test_the_troubles_view_lists_and_republishes_a_given_up_message(nsq: NSQBox) -> None:
    _play(nsq, "rough")
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await channel_seen(pilot, app, "rough")
        app.post_message(OpenChannel("rough", "c"))
        await wait_until(pilot, lambda: isinstance(app.screen, ChannelScreen), "channel view")
        await pilot.press("exclamation_mark")
        screen = await troubles_of(pilot, app)
        await pilot.pause()
        troubles = screen.query_one("#troubles", StatsTable)
        given_up = screen.query_one("#given_up", StatsTable)
        # node, id, requeued, timed out, held, last client, since, size, body
        [trouble] = [troubles.cells(k) for k in troubles.keys]
        assert (trouble[2], trouble[3], trouble[7], trouble[8]) == ("1", "0", "11", "keep trying")
        assert trouble[5] == "the-worker"  # the last client by its user agent, as a journey
        # node, id, finished, attempt, requeued, timed out, finished by, size, body
        [gave] = [given_up.cells(k) for k in given_up.keys]
        assert (gave[3], gave[4], gave[8]) == ("2", "1", "give [red]up[/red]")  # not markup
        assert gave[6] == "the-worker"  # finished by: its user agent, not its hostname
        assert (screen.count, screen.given_up_count) == (1, 1)
        assert screen.check_action("republish", ()) is None  # a message in trouble: no
        # the given-up table, its message republished to another topic
        given_up.focus()
        await pilot.pause()
        assert screen.check_action("republish", ()) is True
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, RepublishScreen), "the form")
        topic = app.screen.query_one("#topic")
        assert getattr(topic, "value", None) == "rough"
        topic.value = "rough-again"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
        await pilot.press("y")
        await wait_until(pilot, lambda: len(app.results) == 1, "republished")
        assert app.results[0].ok, app.results[0]
        assert app.results[0].label.startswith("republish message ")
        assert app.results[0].label.endswith(" to topic rough-again")
        # j opens the given-up message's journey: it was finished at attempt 2
        assert app.screen is screen
        await pilot.press("j")
        journey = await journey_of(pilot, app)
        kinds = column(journey.main_table, KIND)
        assert kinds[-1] == "finished"
        assert column(journey.main_table, ATTEMPT)[-1] == "2"
        stats = (await http.topics(0))["rough"]["channels"]["c"]
        assert stats["depth"] == 0  # the one in trouble is deferred, not queued
        assert stats["deferred_count"] == 1

    run_app(make_app(nsq), body)
    assert nsq.consume("rough-again", "check") == [b"give [red]up[/red]"]


def test_read_only_hides_republishing(nsq: NSQBox) -> None:
    _play(nsq, "rough-ro")

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await channel_seen(pilot, app, "rough-ro")
        app.push_screen(TroublesScreen("rough-ro", "c"))
        screen = await troubles_of(pilot, app)
        screen.query_one("#given_up", StatsTable).focus()
        await pilot.pause()
        assert len(screen.given_up) == 1
        assert screen.check_action("republish", ()) is False
        await pilot.press("R")
        assert app.screen is screen

    run_app(make_app(nsq, read_only=True), body)


def test_real_nsqd_keeps_no_journal(tmp_path: Path) -> None:
    with real_nsqd_app(tmp_path) as (address, app):

        async def body(pilot: Pilot[Any], app: AdminApp) -> None:
            screen = await listed_on_real_nsqd(pilot, app, address)
            assert screen.unsupported
            app.push_screen(TroublesScreen("t", "c"))
            troubles = await troubles_of(pilot, app)
            assert troubles.unsupported
            summary = str(troubles.query_one("#summary", Static).content)
            assert "not supported by these nsqds" in summary
            assert f"{address}: {NOT_SUPPORTED}" in summary
            app.post_message(OpenJourney("0123456789abcdef"))
            journey = await journey_of(pilot, app)
            assert journey.unsupported
            assert journey.main_table.keys == []
            summary = str(journey.query_one("#summary", Static).content)
            assert "not supported by these nsqds" in summary

        run_app(app, body)


def test_a_timed_out_delivery_shows_who_held_it_and_for_how_long(nsq: NSQBox) -> None:
    create_channel(nsq, "slow", "c")
    nsq.publish("slow", b"too slow")
    config = Config(max_in_flight=1, user_agent="the-sleeper", msg_timeout=1.0)
    with BlockingConsumer(nsq.addresses.nsqd_tcp[0], "slow", "c", config=config) as consumer:
        messages = consumer.messages(timeout=TIMEOUT)
        held = next(messages)  # never answered: nsqd times it out after a second
        again = next(messages)  # ... and delivers it again
        assert (again.id, again.attempts) == (held.id, 2)

        async def body(pilot: Pilot[Any], app: AdminApp) -> None:
            await open_messages(pilot, app, "slow", "c")
            screen = await listed(pilot, app)
            assert [m.body for m in screen.messages] == [b"too slow"], screen.error
            await wait_until(pilot, lambda: screen.selected is not None, "the message selected")
            await pilot.press("j")
            journey = await journey_of(pilot, app)
            table = journey.main_table
            kinds = column(table, KIND)
            assert "timed out" in kinds, kinds
            row = table.cells(table.keys[kinds.index("timed out")])
            assert row[CLIENT].startswith("the-sleeper (127.0.0.1:")
            held_for = row[DETAILS]
            assert held_for.startswith("held "), held_for
            # held about the timeout: 1.00s and up (the queue scan runs every 100 ms)
            assert held_for.endswith("s"), held_for
            assert not held_for.endswith("ms"), held_for
            assert float(held_for.removeprefix("held ").removesuffix("s")) >= 1.0
            attempts = column(table, ATTEMPT)
            assert [a for k, a in zip(kinds, attempts, strict=True) if k == "delivered"][:2] == [
                "1",
                "2",
            ]

        run_app(make_app(nsq), body)  # never finished: it times out until the topic goes
