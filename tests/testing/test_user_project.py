"""A user's project written from the docs only (tests/testing/user_project), run three ways.

An app package and its tests, using the fixtures with pynsq, gnsq and nsqbox.client
(sync, asyncio and trio), with an autouse check that nsqbox logs no warning. It must give
the same results in-process, in subprocess mode and under pytest-xdist.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import run_generated

pytest_plugins = ["pytester"]

PROJECT = Path(__file__).resolve().parent / "user_project"
#: Tests in the project (a parametrized test counts twice).
EXPECTED = 9


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    for module in ("nsq", "gnsq", "gevent"):  # the test extra installs them
        pytest.importorskip(module)
    shutil.copytree(
        PROJECT, pytester.path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    pytester.syspathinsert()
    return pytester


@pytest.mark.parametrize(
    "args",
    [
        pytest.param((), id="thread"),
        pytest.param(("--nsqbox-mode=subprocess", "--nsqbox-start-timeout=30"), id="subprocess"),
        pytest.param(("-n", "2"), id="xdist"),
    ],
)
def test_the_user_project_passes(project: pytest.Pytester, args: tuple[str, ...]) -> None:
    if args[:1] == ("-n",):
        pytest.importorskip("xdist")
    result = run_generated(project, "-p", "no:randomly", *args)
    result.assert_outcomes(passed=EXPECTED)
