"""Seeds in a test suite (issue #34): ``nsqbox_seed`` seeds the session box, the factories'
``seed=`` a box of their own, and a bad seed is refused naming its key before anything
starts (docs/state.md and docs/testing.md, "Seeds")."""

from __future__ import annotations

import pytest

from .conftest import run_generated

pytest_plugins = ["pytester"]

SEED = """\
[topics.orders]
channels = { billing = {}, audit = { paused = true } }

[[topics.orders.messages]]
body = "one"

[[topics.orders.messages]]
file = "two.txt"

[[topics.orders.messages]]
body = "later"
defer = "1h"
"""

SESSION_TEST = """\
import pytest


@pytest.mark.parametrize("run", [1, 2])  # the second starts from the seed again
def test_the_session_box_is_seeded(nsqbox, run):
    state = nsqbox.stats().topics["orders"]
    assert not state.paused
    assert state.channels["audit"].paused
    assert not state.channels["billing"].paused
    billing = nsqbox.wait_for("orders", "billing", depth=2, deferred=1)
    assert billing.in_flight == 0
    assert sorted(nsqbox.consume("orders", "billing", 2)) == [b"one", b"two"]
"""

FACTORY_TEST = """\
from pathlib import Path

SEED = Path(__file__).parent / "seed.toml"


def test_a_factory_box_is_seeded(nsqbox_factory):
    box = nsqbox_factory(seed=SEED, clock="manual")
    box.wait_for("orders", "audit", depth=2, deferred=1)
    box.clock.advance("1h")
    box.wait_for("orders", "audit", depth=3, deferred=0)
    assert box.stats().topics["orders"].channels["audit"].paused


def test_a_bad_seed_starts_no_box(nsqbox_factory, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[topics.t]\\nchannels = ['b@d']\\n")
    box = nsqbox_factory(seed=bad)
"""


def test_the_ini_option_seeds_the_session_box(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", seed=SEED)
    pytester.makefile(".txt", two="two\n")
    pytester.makepyfile(test_seeded=SESSION_TEST)
    run_generated(pytester, ini="nsqbox_seed = seed.toml").assert_outcomes(passed=2)


@pytest.mark.parametrize("mode", ["thread", "subprocess"])
def test_the_factory_keyword_seeds_a_box_and_refuses_a_bad_seed(
    pytester: pytest.Pytester, mode: str
) -> None:
    pytester.makefile(".toml", seed=SEED)
    pytester.makefile(".txt", two="two\n")
    pytester.makepyfile(test_factory=FACTORY_TEST)
    result = run_generated(pytester, f"--nsqbox-mode={mode}", "--nsqbox-start-timeout=30")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*nsqbox: cannot seed from *bad.toml, nothing started: topics.t.channels.b@d: invalid*"]
    )


def test_a_bad_session_seed_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", seed='[topics.t]\n[[topics.t.messages]]\nbody = "x"\ndefer = "5"\n')
    pytester.makepyfile(test_seeded=SESSION_TEST)
    result = run_generated(pytester, ini="nsqbox_seed = seed.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*nsqbox: nsqbox_seed: cannot seed from *seed.toml: topics.t.messages[[]0].defer: time:*"]
    )
