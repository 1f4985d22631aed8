"""nsqbox.net.listeners: a ListenerGroup stops listening as one, and a port in use is named.

Rules: localhost only, port 0, a fail_after on every wait.
"""

from __future__ import annotations

import errno
import socket
from functools import partial

import pytest
import trio

from nsqbox.net.listeners import (
    ListenerGroup,
    ListenError,
    bound_address,
    open_listeners,
    serve_tcp,
)

TIMEOUT = 10


async def _refused(address: tuple[str, int]) -> bool:
    try:
        with trio.fail_after(TIMEOUT):
            stream = await trio.open_tcp_stream(*address)
    except OSError:
        return True
    await stream.aclose()
    return False


async def _hold(stream: trio.SocketStream) -> None:
    async with stream:
        await trio.sleep_forever()


Listeners = list[trio.SocketListener]


async def _serve_group() -> tuple[ListenerGroup, list[tuple[str, int]], list[Listeners]]:
    first = await open_listeners("127.0.0.1:0", "test", "TCP")
    second = await open_listeners("127.0.0.1:0", "test", "HTTP")
    group = ListenerGroup(first + second)
    return group, [bound_address(first), bound_address(second)], [first, second]


async def test_cancelling_closes_every_listener_of_the_group() -> None:
    group, addresses, (first, second) = await _serve_group()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(serve_tcp, group=group), first, _hold)
        nursery.start_soon(partial(serve_tcp, group=group), second, _hold)
        await trio.testing.wait_all_tasks_blocked()
        assert [await _refused(a) for a in addresses] == [False, False]
        nursery.cancel_scope.cancel()
    assert group.closed
    # no descriptor of either socket is left listening (an accept loop's duplicate included)
    assert [await _refused(a) for a in addresses] == [True, True]


async def test_closing_the_group_stops_both_and_the_loops_wait_to_be_cancelled() -> None:
    group, addresses, (first, second) = await _serve_group()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(serve_tcp, group=group), first, _hold)
            nursery.start_soon(partial(serve_tcp, group=group), second, _hold)
            await trio.testing.wait_all_tasks_blocked()
            group.close()  # what the first loop to end does: both stop at once
            assert [await _refused(a) for a in addresses] == [True, True]
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()  # the loops raised nothing: they wait for this
    group.close()  # idempotent


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (
            errno.EADDRINUSE,
            "nsqd's TCP address 127.0.0.1:4150 is in use (another nsqd or nsqbox up?)",
        ),
        (errno.EADDRNOTAVAIL, "nsqd's TCP address 127.0.0.1:4150: cannot listen - boom"),
    ],
)
def test_listen_error_names_the_service_and_address(code: int, text: str) -> None:
    error = ListenError(OSError(code, "boom"), "127.0.0.1:4150", "nsqd", "TCP")
    assert (str(error), error.errno) == (text, code)


async def test_a_taken_port_is_a_listen_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        address = f"127.0.0.1:{busy.getsockname()[1]}"
        with pytest.raises(ListenError) as caught:
            await open_listeners(address, "nsqlookupd", "HTTP")
    assert str(caught.value) == (
        f"nsqlookupd's HTTP address {address} is in use (another nsqlookupd or nsqbox up?)"
    )
