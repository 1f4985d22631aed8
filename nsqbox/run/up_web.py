"""``nsqbox up --web``: the box, and the admin TUI served as a web page beside it.

The box runs as ``nsqbox up`` runs it (trio, until SIGINT or SIGTERM); once it listens,
:func:`serve_web_tui` starts textual-serve (:class:`~nsqbox.admin.tui.web.WebTUIThread`: an
asyncio loop in a thread of its own) on ``--web-host``:``--web-port``. textual-serve starts
one ``nsqbox tui --lookupd-http-address <the box's lookupd> --admin-http-address <the box's
admin service>`` subprocess per browser tab, so the box itself stays one process and each tab's
TUI reads it over HTTP, as any tool would (and restarts, crashes and starts its nodes through the
admin service's node control).
``--read-only`` passes on to those TUIs (and to ``--tui``). Those TUIs save listed messages only
under the box's data directory (or ``--web-save-dir``). The page answers only the holder of
the printed URL's token, on an allowed Host (``--allowed-host``, when ``nsqbox up`` has that
flag; see :mod:`nsqbox.admin.tui.web_access`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nsqbox.admin.tui.cli import TUIOptions, add_web_flags, allowed_hosts, tui_command, web_port
from nsqbox.admin.tui.web_access import DEFAULT_WEB_HOST, DEFAULT_WEB_PORT
from nsqbox.go.flags import FlagSet
from nsqbox.net.addresses import dialable, format_address
from nsqbox.run.box import BoxAddresses, BoxOptions

if TYPE_CHECKING:  # trio loads when the box runs, not for ``nsqbox up -h``
    import trio

__all__ = ["WebFlags", "add_up_web_flags", "serve_web_tui", "web_flags"]


@dataclass(frozen=True, slots=True)
class WebFlags:
    """Where ``--web`` serves the TUI, whether its TUIs are read-only, where they may save
    (empty: the box's data directory) and the Host names it answers beside the usual."""

    host: str = DEFAULT_WEB_HOST
    port: int = DEFAULT_WEB_PORT
    read_only: bool = False
    save_dir: str = ""
    allowed_hosts: tuple[str, ...] = ()


def add_up_web_flags(flags: FlagSet) -> None:
    """``--web``, ``--web-host``, ``--web-port``, ``--web-save-dir`` (as ``nsqbox tui``'s) and
    ``--read-only``."""
    add_web_flags(flags, save_dir_default="the data path")
    flags.add_bool("read-only", False, "with --tui or --web: offer no action that changes the box")


def web_flags(flags: FlagSet) -> WebFlags:
    """The flags' values; ValueError for a port out of range."""
    return WebFlags(
        str(flags["web-host"].value.value),
        web_port(flags),
        bool(flags["read-only"].value.value),
        str(flags["web-save-dir"].value.value),
        allowed_hosts(flags),
    )


async def serve_web_tui(
    addresses: BoxAddresses,
    options: BoxOptions,
    web: WebFlags,
    *,
    task_status: trio.TaskStatus[str],
) -> None:
    """Serve the TUI of the box at ``addresses`` until cancelled (``nursery.start`` it: it
    reports the URL to open, with its token; a warning goes to stderr first when the page
    listens beyond loopback); OSError naming the web TUI when its port cannot be had.
    """
    import trio

    # asyncio, aiohttp and textual-serve load only with --web
    from nsqbox.admin.tui.web import WebTUI, WebTUIThread

    nsqd = options.nsqd
    ready = addresses.ready()
    tui = TUIOptions(
        lookupd_http_addresses=(dialable(ready["lookupd_http_address"]),),
        admin_http_address=dialable(ready["admin_http_address"]),
        read_only=web.read_only,
        connect_timeout=nsqd.http_client_connect_timeout,
        request_timeout=nsqd.http_client_request_timeout,
        web_save_dir=web.save_dir or ready["data_path"],
    )
    web_tui = WebTUI(
        tui_command(tui),
        web.host,
        web.port,
        allowed_hosts=web.allowed_hosts,
        broadcast_address=nsqd.broadcast_address or None,
    )
    server = WebTUIThread(web_tui)
    try:
        url = await trio.to_thread.run_sync(server.start)
    except OSError as exc:
        where = format_address((web.host, web.port))
        raise OSError(
            f"the web TUI (--web) cannot listen on {where} - {exc} "
            "(--web-port 0 picks a free port)",
        ) from exc
    if web_tui.warning:
        sys.stderr.write(f"nsqbox up: {web_tui.warning}\n")
        sys.stderr.flush()
    task_status.started(url)
    try:
        await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(server.stop)
