"""bench/steady.py: which counted servers get a full journal ring (side_by_side --callgrind)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bench.steady import STEADY_RING, steady_flags


@dataclass(frozen=True)
class Server:
    callgrind: bool
    extra: tuple[str, ...] = ()


def test_a_counted_journal_on_server_gets_the_steady_ring() -> None:
    assert steady_flags(Server(True)) == (f"--journal-size={STEADY_RING}",)
    assert steady_flags(Server(True, ("--mem-queue-size=0",))) == (f"--journal-size={STEADY_RING}",)


@pytest.mark.parametrize(
    "extra",
    [
        ("--journal-size=0",),
        ("--journal-size", "0"),
        ("-journal-size=0",),
        ("--mem-queue-size=0", "--journal-size=500"),
    ],
    ids=["off", "two-args", "one-dash", "chosen-size"],
)
def test_a_server_whose_flags_choose_a_journal_size_keeps_it(extra: tuple[str, ...]) -> None:
    assert steady_flags(Server(True, extra)) == ()


def test_an_uncounted_server_gets_no_flag() -> None:
    assert steady_flags(Server(False)) == ()
