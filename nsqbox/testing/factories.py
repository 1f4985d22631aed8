"""Fixture factories in the pytest-redis / pytest-postgresql style, for custom boxes.

In a ``conftest.py``::

    from nsqbox.testing import factories

    nsqbox_cluster = factories.nsqbox_proc(nsqd=3, msg_timeout=2.0)   # session-scoped
    nsqbox_in_cluster = factories.nsqbox("nsqbox_cluster")            # per-test handle

    nsqbox_ci = factories.nsqbox_noproc(nsqd_tcp_address="nsqd:4150", nsqd_http_address="nsqd:4151")

Importing this module is cheap: servers (and their imports) load when a fixture runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from .config import (
    Address,
    BoxAddresses,
    BoxConfig,
    BoxStartError,
    Cleanup,
    ClusterSpec,
    Mode,
    SeedPath,
    SpecError,
    split_args,
)

if TYPE_CHECKING:
    from ..snapshot.seed import Seed
    from .boxes import Box
    from .handle import NSQBox

__all__ = ["DataDirs", "nsqbox", "nsqbox_noproc", "nsqbox_proc", "start_configured_box"]

#: Where ``nsqbox_data_path = auto`` puts data when it can: a RAM file system, where
#: nsqd's fsyncs (one per topic created or deleted) cost nothing.
SHM = "/dev/shm"


class DataDirs:
    """New data directories for boxes, as the ``nsqbox_data_path`` option says.

    Directories made outside pytest's temporary directory are removed by
    :meth:`remove` (pytest keeps its own for a few runs, for post-mortems).
    """

    def __init__(self, config: BoxConfig, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.setting = config.data_path
        self.tmp_path_factory = tmp_path_factory

    def _base(self) -> str | None:
        if self.setting == "tmp":
            return None
        if self.setting != "auto":
            os.makedirs(self.setting, exist_ok=True)
            return self.setting
        usable = os.path.isdir(SHM) and os.access(SHM, os.W_OK | os.X_OK)
        return SHM if usable else None

    def new(self, name: str) -> str:
        """A new, empty directory."""
        base = self._base()
        if base is None:
            return str(self.tmp_path_factory.mktemp(name))
        return tempfile.mkdtemp(prefix=f"nsqbox-{name}-", dir=base)

    def remove(self, path: str) -> None:
        """Remove ``path`` unless it is in pytest's temporary directory."""
        if not path.startswith(str(self.tmp_path_factory.getbasetemp())):
            shutil.rmtree(path, ignore_errors=True)


def check_seed(path: SeedPath, nsqd: int) -> Seed:
    """The seed at ``path``, checked whole for a box of ``nsqd`` nsqds; ValueError naming
    the key path (or the node) where it fails."""
    from ..snapshot.seed import read_seed

    seed = read_seed(path)
    if seed.nodes > nsqd:
        raise ValueError(f"it seeds nsqd {seed.nodes - 1}; the box runs {nsqd} nsqd(s)")
    return seed


def start_configured_box(
    config: BoxConfig,
    spec: ClusterSpec,
    data_root: str,
    mode: Mode | str | None = None,
    seed: SeedPath | None = None,
) -> Box:
    """Start ``spec``'s servers as ``mode`` says (default: the configured mode, and a
    thread when that is noproc), and apply ``seed`` (docs/state.md, "Seeds") to them.

    Bad options, a bad seed (checked before anything starts) and failed starts fail the
    test with their message, not a traceback through the plugin.
    """
    from .boxes import start_box
    from .snapshot import load_seed

    checked = None
    if seed:
        try:
            checked = check_seed(seed, spec.nsqd)
        except ValueError as exc:
            pytest.fail(
                f"nsqbox: cannot seed from {os.fspath(seed)}, nothing started: {exc}",
                pytrace=False,
            )
    chosen = Mode(mode) if mode is not None else config.mode
    if chosen is Mode.NOPROC:
        chosen = Mode.THREAD if mode is None else chosen
    try:
        box = start_box(
            spec,
            data_root,
            mode=chosen,
            python=config.interpreter,
            start_timeout=config.start_timeout,
            timeout=config.timeout,
        )
    except (SpecError, BoxStartError) as exc:
        pytest.fail(f"nsqbox: {exc}", pytrace=False)
    if checked is not None:
        try:
            load_seed(box.addresses, checked, config.timeout)
        except BaseException:
            box.stop()
            raise
    return box


def nsqbox_proc(
    *,
    nsqd: int = 1,
    lookupd: int = 1,
    nsqd_args: str | Sequence[str] = (),
    lookupd_args: str | Sequence[str] = (),
    mode: Mode | str | None = None,
    scope: Any = "session",
    seed: SeedPath | None = None,
    **nsqd_options: Any,
) -> Any:
    """A fixture that starts a box of ``nsqd`` nsqds and ``lookupd`` nsqlookupds.

    ``nsqd_options`` are NSQDOptions fields (``msg_timeout=2.0``); ``nsqd_args`` nsqd
    flags (``"--msg-timeout=2s"``). ``mode`` is ``"thread"`` or ``"subprocess"``
    (default: the ``nsqbox_mode`` option). ``seed`` is a seed file applied as it starts.
    """
    spec = ClusterSpec(
        nsqd=nsqd,
        lookupd=lookupd,
        nsqd_args=split_args(nsqd_args),
        lookupd_args=split_args(lookupd_args),
        nsqd_options=dict(nsqd_options),
    )

    def fixture(
        nsqbox_config: BoxConfig, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Box]:
        dirs = DataDirs(nsqbox_config, tmp_path_factory)
        data_root = dirs.new("box")
        try:
            box = start_configured_box(nsqbox_config, spec, data_root, mode, seed)
            try:
                yield box
            finally:
                box.stop()
        finally:
            dirs.remove(data_root)

    return pytest.fixture(scope=scope)(fixture)


def nsqbox_noproc(
    *,
    nsqd_tcp_address: str | Sequence[str] = "127.0.0.1:4150",
    nsqd_http_address: str | Sequence[str] = "127.0.0.1:4151",
    lookupd_tcp_address: str | Sequence[str] = (),
    lookupd_http_address: str | Sequence[str] = (),
    scope: Any = "session",
) -> Any:
    """A fixture for servers that already run (real NSQ in CI, say)."""

    def listed(value: str | Sequence[str]) -> tuple[Address, ...]:
        items = value.split(",") if isinstance(value, str) else value
        return tuple(Address(a.strip()) for a in items if a.strip())

    addresses = BoxAddresses(
        nsqd_tcp=listed(nsqd_tcp_address),
        nsqd_http=listed(nsqd_http_address),
        lookupd_tcp=listed(lookupd_tcp_address),
        lookupd_http=listed(lookupd_http_address),
    )

    def fixture(nsqbox_config: BoxConfig) -> Box:
        return connect_noproc(addresses, nsqbox_config.timeout)

    return pytest.fixture(scope=scope)(fixture)


def connect_noproc(addresses: BoxAddresses, timeout: float) -> Box:
    """A NoProcBox; the test fails with a clear message when a server does not answer."""
    from .boxes import NoProcBox
    from .remote import NSQHTTPError

    try:
        return NoProcBox(addresses, timeout=timeout)
    except NSQHTTPError as exc:
        pytest.fail(
            f"nsqbox noproc: the servers do not answer ({exc}); start them, or set "
            "--nsqbox-nsqd-tcp-address/--nsqbox-nsqd-http-address/--nsqbox-lookupd-http-address",
            pytrace=False,
        )


def nsqbox(
    box_fixture: str, *, cleanup: Cleanup | str | None = None, timeout: float | None = None
) -> Callable[..., Iterator[NSQBox]]:
    """A function-scoped handle fixture on the box fixture named ``box_fixture``."""

    def fixture(request: pytest.FixtureRequest, nsqbox_config: BoxConfig) -> Iterator[NSQBox]:
        from .handle import NSQBox

        box = request.getfixturevalue(box_fixture)
        with NSQBox(
            box,
            timeout=nsqbox_config.timeout if timeout is None else timeout,
            cleanup=nsqbox_config.cleanup if cleanup is None else Cleanup(cleanup),
        ) as handle:
            yield handle

    return pytest.fixture(fixture)
