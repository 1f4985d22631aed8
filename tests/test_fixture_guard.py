"""tests/fixture_guard.py: an async fixture that only autouse brings in fails collection."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

MODULE = """
import pytest

RAN = []

@pytest.fixture{decorator_args}
async def cleanup():
    yield
    RAN.append("cleanup")

@pytest.fixture
async def outer(cleanup):
    yield

async def test_it({args}):
    pass

async def test_cleanup_ran_after_the_first(cleanup):
    assert RAN == ["cleanup"]
"""


def _run(pytester: pytest.Pytester, decorator_args: str, args: str) -> pytest.RunResult:
    pytester.makeini("[pytest]\ntrio_mode = true\naddopts = -p no:cacheprovider\n")
    pytester.makeconftest(
        "from tests.fixture_guard import pytest_collection_modifyitems"
        " as pytest_collection_modifyitems\n"
    )
    pytester.makepyfile(MODULE.format(decorator_args=decorator_args, args=args))
    return pytester.runpytest()


def test_an_async_fixture_only_autouse_brings_in_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    result = _run(pytester, "(autouse=True)", "")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_it: async fixture 'cleanup' is only autouse*"])


@pytest.mark.parametrize(("decorator_args", "args"), [("(autouse=True)", "cleanup"), ("", "outer")])
def test_an_async_fixture_the_arguments_reach_runs(
    pytester: pytest.Pytester, decorator_args: str, args: str
) -> None:
    result = _run(pytester, decorator_args, args)
    result.assert_outcomes(passed=2)
