"""Differential test: nsqbox and real nsqd/nsqlookupd v1.3.0 answer the same edge cases alike.

Every case of :mod:`tests.compat.differential_cases` (TCP error and success
frames with close behaviour, HTTP status, headers and bodies) goes to nsqbox and
is compared with nsqd's reply, recorded in :mod:`tests.compat.differential_expected`.
When the real binaries are at hand (``NSQ_BIN``, default ``../shared/nsq/bin``
beside the repository), each case also goes to them, and nsqbox's reply must
equal theirs (which must still be the recorded one). The only differences
allowed are in :data:`~tests.compat.differential_cases.ALLOWED`, with reasons.

Each server starts once for the module, as a subprocess on ports it picks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.compat.differential import (
    NSQ_BIN,
    Reply,
    Server,
    nsqbox_argv,
    real_binary,
    running,
)
from tests.compat.differential_cases import ALLOWED, CASES, Case, run_case
from tests.compat.differential_expected import EXPECTED

Servers = dict[str, Server]


@pytest.fixture(scope="module")
def nsqbox_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """nsqbox's nsqd and nsqlookupd, for the whole module."""
    root = tmp_path_factory.mktemp("nsqbox")
    with ExitStack() as stack:
        yield {
            program: stack.enter_context(running(nsqbox_argv(program), program, root / program))
            for program in ("nsqd", "nsqlookupd")
        }


@pytest.fixture(scope="module")
def real_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """Real nsqd and nsqlookupd, for the whole module; skips when they are not at hand."""
    binaries = {program: real_binary(program) for program in ("nsqd", "nsqlookupd")}
    missing = [program for program, binary in binaries.items() if binary is None]
    if missing:
        pytest.skip(f"no real {', '.join(missing)} to run in {NSQ_BIN} (set NSQ_BIN)")
    root = tmp_path_factory.mktemp("real")
    with ExitStack() as stack:
        yield {
            program: stack.enter_context(running([str(binary)], program, root / program))
            for program, binary in binaries.items()
            if binary is not None
        }


def _check_nsqbox(case: Case, reply: Reply, nsqd_reply: Reply) -> None:
    allowed = ALLOWED.get(case.id)
    if allowed is None:
        assert reply == nsqd_reply
    else:  # a documented difference: nsqbox's own answer, whatever nsqd says
        assert reply[0] == allowed[1], allowed[0]


_IDS = [case.id for case in CASES]


def test_every_case_has_a_recorded_reply() -> None:
    assert sorted(EXPECTED) == sorted(_IDS)
    assert set(ALLOWED) <= set(_IDS)
    assert len(_IDS) == len(set(_IDS))


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_nsqbox_answers_as_recorded(nsqbox_servers: Servers, case: Case) -> None:
    _check_nsqbox(case, run_case(case, nsqbox_servers), EXPECTED[case.id])


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_nsqbox_answers_as_real_nsq(
    real_servers: Servers, nsqbox_servers: Servers, case: Case
) -> None:
    real = run_case(case, real_servers)
    assert real == EXPECTED[case.id], "the recording is stale: python -m tests.compat.differential"
    _check_nsqbox(case, run_case(case, nsqbox_servers), real)


def test_allowed_differences_are_differences() -> None:
    # an allowed case where nsqd now answers as nsqbox does should leave the list
    for case_id, (reason, status) in ALLOWED.items():
        assert EXPECTED[case_id][0] != status, (case_id, reason)
