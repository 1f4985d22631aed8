"""nsqbox's pytest plugin: real NSQ servers for integration tests, started in milliseconds.

Registered through the ``pytest11`` entry point ``nsqbox`` (or ``-p nsqbox.testing.plugin``).
Fixtures, named after the pytest-redis / pytest-postgresql convention:

``nsqbox_session`` (session)
    the session's servers as ``--nsqbox-mode`` says: ``nsqbox_noproc`` in noproc mode,
    else ``nsqbox_proc``; the box the ``nsqbox`` handle uses. Build module- and
    session-scoped fixtures of your own on this one.
``nsqbox_proc`` (session)
    nsqd + nsqlookupd (the nsqd registered with the lookupd), on their own trio loop in
    a thread of the test process; child processes with ``--nsqbox-mode=subprocess``.
    Always servers of its own, even in noproc mode (where it warns).
``nsqbox_noproc`` (session)
    servers that already run (``--nsqbox-nsqd-tcp-address`` ...): public APIs only.
``nsqbox`` (function)
    the test's :class:`~nsqbox.testing.NSQBox` handle on ``nsqbox_session``; cleans up
    after the test.
``nsqbox_factory`` (function)
    ``nsqbox_factory(nsqd=3, lookupd=2, msg_timeout=1.0)``: more boxes, custom options.
``nsqbox_trio``, ``nsqbox_trio_factory`` (function, pytest-trio)
    the servers in the test's own nursery, with an awaitable handle.
``nsqbox_config`` (session)
    the resolved options.

Every option is an ini key ``nsqbox_<name>`` and a flag ``--nsqbox-<name>``; see
``pytest --help``. Importing this module loads no server code, no HTTP client and no
event loop; the fixtures import what they need when they run.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from .options import OPTIONS, Option

if TYPE_CHECKING:
    import trio

    from .boxes import Box
    from .config import BoxConfig, ClusterSpec, Mode, SeedPath
    from .handle import NSQBox, NSQBoxFactory
    from .trio_box import TrioBoxFactory, TrioNSQBox

__all__ = [
    "NSQBoxWarning",
    "nsqbox",
    "nsqbox_config",
    "nsqbox_factory",
    "nsqbox_noproc",
    "nsqbox_proc",
    "nsqbox_session",
    "nsqbox_trio",
    "nsqbox_trio_factory",
]

_CONFIG_KEY = pytest.StashKey["BoxConfig"]()


class NSQBoxWarning(pytest.PytestWarning):
    """A fixture of nsqbox used in a way that probably does not do what was meant."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register every option as an ini key and a command-line flag."""
    group = parser.getgroup("nsqbox", "nsqbox: NSQ servers for integration tests")
    for opt in OPTIONS:
        group.addoption(
            opt.flag,
            dest=opt.ini,
            default=None,
            choices=opt.choices or None,
            help=f"{opt.help} (ini: {opt.ini}; default: {opt.default!r})",
        )
        parser.addini(opt.ini, help=opt.help, default=opt.default)


def _raw(config: pytest.Config, opt: Option) -> str:
    """An option's text: the flag's, else the ini key's, else the default."""
    flag = config.getoption(opt.ini, None)
    if flag is not None:
        return str(flag)
    ini = config.getini(opt.ini)
    return opt.default if ini is None else str(ini)


def get_config(config: pytest.Config) -> BoxConfig:
    """The plugin's settings for this session: flags over ini keys over defaults."""
    from .config import BoxConfig

    cached = config.stash.get(_CONFIG_KEY, None)
    if cached is not None:
        return cached
    try:
        resolved = BoxConfig.resolve(lambda opt: _raw(config, opt))
    except ValueError as exc:
        raise pytest.UsageError(f"nsqbox: {exc}") from None
    if resolved.seed:  # relative to the rootdir, and checked before anything starts
        from .factories import check_seed

        seed = str(config.rootpath / resolved.seed)
        resolved = dataclasses.replace(resolved, seed=seed)
        try:
            check_seed(seed, resolved.nsqd_count)
        except ValueError as exc:
            raise pytest.UsageError(
                f"nsqbox: nsqbox_seed: cannot seed from {seed}: {exc}"
            ) from None
    config.stash[_CONFIG_KEY] = resolved
    return resolved


def pytest_configure(config: pytest.Config) -> None:
    """Check options that were set, so a typo fails the run before any test.

    With every option at its default there is nothing to check, and nothing more
    is imported: a project that has nsqbox installed but does not use it pays nothing.
    """
    if any(_raw(config, opt) != opt.default for opt in OPTIONS):
        get_config(config)


def pytest_report_header(config: pytest.Config) -> str:
    """One header line: where the servers run."""
    raw = {opt.name: _raw(config, opt) for opt in OPTIONS}
    if raw["mode"] == "noproc":
        return f"nsqbox: noproc, nsqd {raw['nsqd_tcp_address']}"
    return f"nsqbox: {raw['mode']}, {raw['nsqd_count']} nsqd, {raw['lookupd_count']} nsqlookupd"


# -- session fixtures ---------------------------------------------------------------


@pytest.fixture(scope="session")
def nsqbox_config(pytestconfig: pytest.Config) -> BoxConfig:
    """The resolved ``nsqbox_*`` options."""
    return get_config(pytestconfig)


@pytest.fixture(scope="session")
def nsqbox_proc(
    nsqbox_config: BoxConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Box]:
    """The session's box: nsqd(s) and nsqlookupd(s) in a thread, or child processes.

    Servers of its own in every mode: in noproc mode the ``nsqbox`` handle does not use
    them, so this warns there. Fixtures that should follow the mode use ``nsqbox_session``.
    """
    from .config import Mode
    from .factories import DataDirs, start_configured_box

    if nsqbox_config.mode is Mode.NOPROC:
        warnings.warn(
            NSQBoxWarning(
                "nsqbox_proc starts servers of its own, but with --nsqbox-mode=noproc the "
                "nsqbox handle uses the running servers (nsqbox_noproc): an app started on "
                "nsqbox_proc talks to servers the handle does not see. Use nsqbox_session, "
                "which follows --nsqbox-mode."
            ),
            stacklevel=1,
        )

    dirs = DataDirs(nsqbox_config, tmp_path_factory)
    data_root = dirs.new("session")
    try:
        spec = nsqbox_config.spec()
        box = start_configured_box(nsqbox_config, spec, data_root, seed=nsqbox_config.seed)
        try:
            yield box
        finally:
            box.stop()
    finally:
        dirs.remove(data_root)


@pytest.fixture(scope="session")
def nsqbox_noproc(nsqbox_config: BoxConfig) -> Box:
    """Servers that already run, at the ``nsqbox_*_address`` options."""
    from .factories import connect_noproc

    try:
        addresses = nsqbox_config.noproc_addresses()
    except ValueError as exc:
        raise pytest.UsageError(f"nsqbox: {exc}") from None
    return connect_noproc(addresses, nsqbox_config.timeout)


# -- per-test fixtures --------------------------------------------------------------


@pytest.fixture(scope="session")
def nsqbox_session(request: pytest.FixtureRequest, nsqbox_config: BoxConfig) -> Box:
    """The session's servers as ``--nsqbox-mode`` says: ``nsqbox_noproc`` in noproc mode,
    else ``nsqbox_proc``.

    The very box the ``nsqbox`` handle uses (so what a module- or session-scoped fixture
    starts on it is what the test's handle sees), with the same address attributes.
    """
    from .config import Mode

    which = "nsqbox_noproc" if nsqbox_config.mode is Mode.NOPROC else "nsqbox_proc"
    box: Box = request.getfixturevalue(which)
    return box


@pytest.fixture
def nsqbox(nsqbox_session: Box, nsqbox_config: BoxConfig) -> Iterator[NSQBox]:
    """The test's handle: addresses, publish, wait_for, stats, capture, consume.

    Topics the test created are gone after it (``nsqbox_cleanup``), so tests that use
    the same topic names do not see each other's messages. With ``nsqbox_seed``, the
    session box is seeded again after that cleanup: every test starts from the seed.
    """
    from .config import Cleanup, Mode
    from .handle import NSQBox

    with NSQBox(
        nsqbox_session, timeout=nsqbox_config.timeout, cleanup=nsqbox_config.cleanup
    ) as handle:
        yield handle
    config = nsqbox_config
    if config.seed and config.cleanup is not Cleanup.NONE and config.mode is not Mode.NOPROC:
        from .factories import check_seed
        from .snapshot import load_seed

        load_seed(
            nsqbox_session.addresses, check_seed(config.seed, config.nsqd_count), config.timeout
        )


def _spec(
    nsqd: int,
    lookupd: int,
    nsqd_args: str | Sequence[str],
    lookupd_args: str | Sequence[str],
    nsqd_options: dict[str, Any],
    clock: str = "real",
) -> ClusterSpec:
    from .config import ClusterSpec, split_args

    return ClusterSpec(
        nsqd=nsqd,
        lookupd=lookupd,
        nsqd_args=split_args(nsqd_args),
        lookupd_args=split_args(lookupd_args),
        nsqd_options=nsqd_options,
        clock=clock,
    )


@pytest.fixture
def nsqbox_factory(
    nsqbox_config: BoxConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NSQBoxFactory]:
    """Start boxes with custom options or several nodes; all stopped after the test.

    ``nsqbox_factory(nsqd=2, lookupd=2, msg_timeout=1.0, nsqd_args="--max-rdy-count=10")``
    """
    from .config import Cleanup
    from .factories import DataDirs, start_configured_box
    from .handle import NSQBox

    dirs = DataDirs(nsqbox_config, tmp_path_factory)
    made: list[str] = []
    started: list[tuple[Box, NSQBox]] = []

    def factory(
        *,
        nsqd: int = 1,
        lookupd: int = 1,
        nsqd_args: str | Sequence[str] = (),
        lookupd_args: str | Sequence[str] = (),
        mode: Mode | str | None = None,
        clock: str = "real",
        seed: SeedPath | None = None,
        **nsqd_options: Any,
    ) -> NSQBox:
        spec = _spec(nsqd, lookupd, nsqd_args, lookupd_args, nsqd_options, clock)
        data_root = dirs.new("factory")
        made.append(data_root)
        box = start_configured_box(nsqbox_config, spec, data_root, mode, seed)
        handle = NSQBox(box, timeout=nsqbox_config.timeout, cleanup=Cleanup.NONE)
        started.append((box, handle))
        return handle

    try:
        yield factory
    finally:
        for box, handle in reversed(started):
            handle.close()
            box.stop()
        for path in made:
            dirs.remove(path)


# -- trio-native fixtures (pytest-trio) ------------------------------------------------


@pytest.fixture
async def nsqbox_trio(
    nursery: trio.Nursery,
    nsqbox_config: BoxConfig,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[TrioNSQBox]:
    """nsqd + nsqlookupd in the test's own nursery (pytest-trio), with an awaitable handle."""
    from .factories import DataDirs
    from .trio_box import open_trio_box

    dirs = DataDirs(nsqbox_config, tmp_path_factory)
    data_root = dirs.new("trio")
    try:
        box = await open_trio_box(
            nursery,
            nsqbox_config.spec(),
            data_root,
            wait_timeout=nsqbox_config.timeout,
            start_timeout=nsqbox_config.start_timeout,
        )
        yield box
        await box.aclose()
    finally:
        dirs.remove(data_root)


@pytest.fixture
async def nsqbox_trio_factory(
    nursery: trio.Nursery,
    nsqbox_config: BoxConfig,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[TrioBoxFactory]:
    """Start boxes with custom options in the test's own nursery (pytest-trio)."""
    from .factories import DataDirs
    from .trio_box import open_trio_box

    dirs = DataDirs(nsqbox_config, tmp_path_factory)
    started: list[tuple[TrioNSQBox | None, str]] = []

    async def factory(
        *,
        nsqd: int = 1,
        lookupd: int = 1,
        nsqd_args: str | Sequence[str] = (),
        lookupd_args: str | Sequence[str] = (),
        clock: str = "real",
        **nsqd_options: Any,
    ) -> TrioNSQBox:
        data_root = dirs.new("trio-factory")
        started.append((None, data_root))
        box = await open_trio_box(
            nursery,
            _spec(nsqd, lookupd, nsqd_args, lookupd_args, nsqd_options, clock),
            data_root,
            wait_timeout=nsqbox_config.timeout,
            start_timeout=nsqbox_config.start_timeout,
        )
        started[-1] = (box, data_root)
        return box

    try:
        yield factory
        for box, _ in reversed(started):
            if box is not None:
                await box.aclose()
    finally:
        for _, data_root in started:
            dirs.remove(data_root)
