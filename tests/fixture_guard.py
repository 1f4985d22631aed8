"""Collection check: no async fixture that pytest-trio would silently never run.

pytest-trio runs only the async fixtures that a test's arguments reach (directly or
through other fixtures). An async fixture that gets in only by ``autouse=True`` is
set up by pytest as a placeholder and never executed: its cleanup never happens
(test_write_faults once leaked nine sockets this way). The suite's conftest imports
this hook so that such a fixture is an error at collection instead.
"""

from __future__ import annotations

import inspect

import pytest


def _reached(item: pytest.Function) -> set[str]:
    """Names of the fixtures that the test's own arguments reach."""
    defs = item._fixtureinfo.name2fixturedefs
    todo = list(item._fixtureinfo.argnames)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for fixturedef in defs.get(name, ()):
            todo.extend(fixturedef.argnames)
    return seen


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        reached = _reached(item)
        for name, fixturedefs in item._fixtureinfo.name2fixturedefs.items():
            func = fixturedefs[-1].func
            is_async = inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)
            if is_async and name not in reached:
                raise pytest.UsageError(
                    f"{item.nodeid}: async fixture {name!r} is only autouse, and "
                    "pytest-trio never runs it; name it in the test's arguments"
                )
