"""``nsqbox up --tui``: the admin TUI with the whole box running inside it.

:class:`BoxApp` is the admin TUI's app (:class:`~nsqbox.admin.tui.app.AdminApp`) that starts
:func:`~nsqbox.run.box.serve_box` as a trio guest of Textual's asyncio loop
(:class:`~nsqbox.admin.tui.guest.TrioGuest`) when it mounts, points the views at the box's
lookupd once everything listens, and stops the guest run — waiting until trio has completely
finished — before it finishes unmounting. The TUI itself knows nothing of the box: it reads the
box through HTTP like any other cluster.

While the app runs, the servers' log lines go to a buffer shown by the Logs view (``L``) instead
of stderr, where they would tear the screen; the last ones are printed if the box fails. Until
the box listens they are kept at ``info`` even when ``--log-level`` is higher (``nsqbox up``'s
default is ``warn``, which a healthy start never reaches): the Logs view opens on the start-up
lines and the banner ``nsqbox up`` prints, then follows ``--log-level``. Where the box listens
stays on the status line (:attr:`~nsqbox.admin.tui.app.AdminApp.notice`), not in a
notification over the table.
"""

from __future__ import annotations

import logging
import sys
from functools import partial
from typing import Any, TextIO, cast

import outcome
import trio
from textual.binding import Binding

from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.backend import open_model_backend
from nsqbox.admin.tui.guest import TrioGuest
from nsqbox.admin.tui.logs import LogBuffer, LogScreen
from nsqbox.cli import fatal
from nsqbox.net.addresses import dialable, format_address, parse_address
from nsqbox.process.logs import LEVELS, ROOT_LOGGER, NSQFormatter, parse_level
from nsqbox.run.box import BOX_PREFIX, LOG_PREFIXES, BoxAddresses, BoxOptions, NodeTag, serve_box

__all__ = ["BoxApp", "box_notice", "dialable", "run_box_tui"]

#: The level the Logs view gets the box's start-up lines at, whatever ``--log-level`` says.
START_LEVEL = logging.INFO


def _listen(tcp: tuple[str, int], http: tuple[str, int] | None) -> str:
    """``TCP 127.0.0.1:4150, HTTP :4151`` (the HTTP host only when it differs)."""
    if http is None:
        return f"TCP {format_address(tcp)}, HTTP off"
    same = parse_address(http)[0] == parse_address(tcp)[0]
    return f"TCP {format_address(tcp)}, HTTP {f':{http[1]}' if same else format_address(http)}"


def box_notice(addresses: BoxAddresses) -> str:
    """One status line saying where the box listens, and that quitting stops it."""
    parts = [
        f"{'nsqd' if len(addresses.nsqds) == 1 else f'nsqd {i}'} {_listen(n.tcp, n.http)}"
        for i, n in enumerate(addresses.nsqds)
    ]
    parts.append(f"lookupd {_listen(addresses.lookupd.tcp, addresses.lookupd.http)}")
    parts.append(f"admin HTTP {format_address(addresses.admin.http)}")
    return "box: " + " · ".join(parts) + " · q stops the box"


class BoxApp(AdminApp):
    """The admin TUI with the whole box (lookupd, nsqds, admin) running inside it."""

    BINDINGS = [Binding("L", "logs", "Logs")]

    def __init__(
        self, options: BoxOptions, *, logs: LogBuffer | None = None, **kwargs: Any
    ) -> None:
        super().__init__(None, **kwargs)
        self.options = options
        self.logs = logs or LogBuffer()
        self._log_handler = logging.StreamHandler(cast(TextIO, self.logs))
        self._log_level = logging.NOTSET
        self.guest = TrioGuest()
        self.guest.on_done = self._box_done
        #: Where the box listens, once it does.
        self.addresses: BoxAddresses | None = None
        #: Why the box stopped on its own (it failed to start, or crashed), if it did.
        self.failure: BaseException | None = None

    def on_mount(self) -> None:
        """Send the servers' log to the buffer, start the box; the views connect once it listens.

        Until it listens the log is kept at ``info`` at least (see the module's docstring).
        """
        nsqd = self.options.nsqd
        self._log_handler.setFormatter(NSQFormatter(nsqd.log_prefix, LOG_PREFIXES))
        if self.options.nsqd_count > 1:
            self._log_handler.addFilter(NodeTag())
        logger = logging.getLogger(ROOT_LOGGER)
        self._log_level = logger.level
        logger.addHandler(self._log_handler)
        logger.setLevel(min(self.level, START_LEVEL))
        self.guest.start(self._serve)

    @property
    def level(self) -> int:
        """The stdlib level ``--log-level`` names."""
        return LEVELS[parse_level(self.options.nsqd.log_level)]

    async def on_unmount(self) -> None:
        """Stop the box and wait until trio has completely finished; restore logging."""
        try:
            await self.guest.stop()
        finally:
            logger = logging.getLogger(ROOT_LOGGER)
            logger.removeHandler(self._log_handler)
            logger.setLevel(self._log_level)

    async def _serve(self) -> None:
        async with trio.open_nursery() as nursery:
            addresses: BoxAddresses = await nursery.start(serve_box, self.options)
            self._box_started(addresses)

    def _box_started(self, addresses: BoxAddresses) -> None:
        self.addresses = addresses
        self.broker_clock = addresses.clock
        lookupd = dialable(addresses.ready()["lookupd_http_address"])
        nsqd = self.options.nsqd
        self.connect(
            partial(
                open_model_backend,
                lookupd_http_addresses=[lookupd],
                admin_http_address=dialable(addresses.ready()["admin_http_address"]),
                connect_timeout=nsqd.http_client_connect_timeout,
                request_timeout=nsqd.http_client_request_timeout,
            )
        )
        self.notice = box_notice(addresses)
        # What `nsqbox up` prints on a terminal, after the start-up lines; then --log-level.
        banner = addresses.banner()
        self.logs.write(banner.replace("running; Ctrl-C stops", "running; q stops"))
        logger = logging.getLogger(ROOT_LOGGER)
        if logger.level == min(self.level, START_LEVEL):  # not changed through /config since
            logger.setLevel(self.level)
        if self.level > START_LEVEL:
            name = parse_level(self.options.nsqd.log_level)
            self.logs.write(f"nsqbox up: the log shows {name} and above from here (--log-level)\n")

    def _box_done(self, result: outcome.Outcome[Any]) -> None:
        if isinstance(result, outcome.Error) and not isinstance(result.error, trio.Cancelled):
            error: BaseException = result.error
            while isinstance(error, BaseExceptionGroup):
                error = error.exceptions[0]
            self.failure = error
            self.exit(return_code=1)

    def action_logs(self) -> None:
        """Show the box's log."""
        self.push_screen(LogScreen(self.logs))


def run_box_tui(options: BoxOptions, *, read_only: bool = False, interval: float = 2.0) -> int:
    """``nsqbox up --tui``: run the box inside the TUI until the TUI quits; the exit status."""
    app = BoxApp(options, read_only=read_only, interval=interval)
    app.run()
    if app.failure is not None:
        sys.stderr.writelines(line + "\n" for line in list(app.logs.lines)[-20:])
        if app.addresses is None:
            return fatal(f"failed to start nsqbox - {app.failure}", BOX_PREFIX)
        return fatal(f"nsqbox stopped - {app.failure}")
    return app.return_code or 0
