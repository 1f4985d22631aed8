"""``nsqbox up``: the box (:mod:`nsqbox.run.box`) as a command, until SIGINT or SIGTERM.

With no flags the box listens on 127.0.0.1 at NSQ's standard ports and keeps its data in
``./nsqbox-data``. ``--nsqd-count N`` runs N nsqds (node ``i`` on the base ports plus
``100 * i``, its data in ``<data-path>/node<i>``). ``--ephemeral-ports`` puts every listener
whose address is not given explicitly on port 0 (``--web-port`` too), and so does an nsqd
``--tcp-address`` with port 0; the banner and ``--ready-json`` show the ports bound.

``nsqbox up`` takes nsqd's flags (applied to every node) and its own; ``--config`` names a TOML
file holding either, keyed by flag name with ``-`` turned into ``_``. ``--tui`` runs the terminal
admin UI with the box inside it (:mod:`nsqbox.run.up_tui`); only then is Textual imported. ``--web``
serves that TUI as a web page beside the box (:mod:`nsqbox.run.up_web`).
SIGINT or SIGTERM shuts everything down; each nsqd persists its messages and metadata as it stops.
"""

from __future__ import annotations

import gc
import json
import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nsqbox.cli import fatal, first_error, parse_nsqd_command, version_line
from nsqbox.go.flags import FlagSet
from nsqbox.net.addresses import split_host_port
from nsqbox.nsqd.config import (
    ConfigError,
    Kind,
    OptionFlag,
    coerce,
    flag_value,
    load_config_file,
    nsqd_flag_set,
)
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.process.logs import configure_logging
from nsqbox.run.box import (
    BOX_PREFIX,
    LOG_PREFIXES,
    BoxAddresses,
    BoxOptions,
    NodeTag,
    serve_box,
    with_port,
)
from nsqbox.run.up_web import WebFlags, add_up_web_flags, web_flags

if TYPE_CHECKING:
    import trio

__all__ = ["UP_OPTION_FLAGS", "main", "resolve_up_options", "run", "up_flag_set"]

logger = logging.getLogger("nsqbox.run.box")

#: ``nsqbox up``'s own options (nsqd's come from nsqd's flag set).
UP_OPTION_FLAGS: tuple[OptionFlag, ...] = (
    OptionFlag("nsqd-count", Kind.INT, "number of nsqd nodes, [1,64]"),
    OptionFlag(
        "nsqlookupd-tcp-address",
        Kind.STRING,
        "<addr>:<port> of the box's nsqlookupd for TCP (nsqd registration)",
        field="lookupd_tcp_address",
    ),
    OptionFlag(
        "nsqlookupd-http-address",
        Kind.STRING,
        "<addr>:<port> of the box's nsqlookupd for HTTP clients",
        field="lookupd_http_address",
    ),
    OptionFlag(
        "nsqadmin-http-address",
        Kind.STRING,
        "<addr>:<port> of the admin service (nsqadmin's /api)",
        field="admin_http_address",
    ),
    OptionFlag("clock", Kind.STRING, "the broker clock: real, or manual (nsqbox clock advance)"),
    OptionFlag(
        "load",
        Kind.STRING,
        "a snapshot file to load at start (nsqbox snapshot save; .gz for gzip)",
        field="load_path",
    ),
    OptionFlag(
        "seed",
        Kind.STRING,
        "a seed file (TOML: topics, channels, messages) to apply at start (docs/state.md)",
        field="seed_path",
    ),
)


def up_flag_set(defaults: BoxOptions) -> FlagSet:
    """nsqd's flags, then ``nsqbox up``'s own."""
    flags = nsqd_flag_set("nsqbox up", defaults.nsqd)
    # nsqd's texts where the box differs: its data directory, its node ids, its log level's
    # default written as it is given (nsqd shows Go's WARNING)
    flags["data-path"].usage = "directory for nsqd 0's data (nsqd i's: node<i>/ in it)"
    flags["node-id"].usage = "node id of nsqd 0 in message ids, [0,1024) (nsqd i: node-id + i)"
    flags["log-level"].default_text = defaults.nsqd.log_level
    for opt in UP_OPTION_FLAGS:
        flags.var(opt.flag, flag_value(opt.kind, getattr(defaults, opt.attr)), opt.usage)
    flags.add_bool("ephemeral-ports", False, "listen on ports the OS picks (port 0) everywhere")
    flags.add_bool(
        "ready-json", False, "once listening, print the addresses as one JSON line on stdout"
    )
    flags.add_bool("tui", False, "run the terminal admin UI with the box inside it")
    add_up_web_flags(flags)
    return flags


def resolve_up_options(flags: FlagSet, nsqd: NSQDOptions) -> tuple[BoxOptions, bool]:
    """BoxOptions from the flags and the config file; also whether to print the ready line."""
    path = flags["config"].value.value
    cfg = load_config_file(path) if path else {}
    options = BoxOptions(nsqd=nsqd)
    if not flags.is_set("node-id") and "id" not in cfg:
        nsqd.node_id = 0  # nodes are numbered from 0, not from the hostname's hash
    values: dict[str, Any] = {}
    for opt in (*UP_OPTION_FLAGS, OptionFlag("ephemeral-ports", Kind.BOOL, "")):
        if flags.is_set(opt.flag):
            values[opt.attr] = flags[opt.flag].value.value
        elif opt.config_key in cfg:
            try:
                values[opt.attr] = coerce(opt.kind, cfg[opt.config_key])
            except ValueError as exc:
                raise ConfigError(
                    f"failed to coerce config value {opt.config_key} = "
                    f"{cfg[opt.config_key]} - {exc}"
                ) from None
    for name, value in values.items():
        if name != "ephemeral_ports":
            setattr(options, name, value)
    # --ephemeral-ports, or an nsqd on port 0 (a test harness, usually): every address not
    # given explicitly takes port 0, so such a box never grabs a fixed port.
    if values.get("ephemeral_ports") or split_host_port(nsqd.tcp_address)[1] == 0:
        addresses: list[tuple[str, str, Any, str]] = [
            ("tcp-address", "tcp_address", nsqd, "tcp_address"),
            ("http-address", "http_address", nsqd, "http_address"),
            ("https-address", "https_address", nsqd, "https_address"),
        ]
        addresses += [
            (o.flag, o.config_key, options, o.attr)
            for o in UP_OPTION_FLAGS
            if o.flag.endswith("-address")
        ]
        for flag, key, owner, attr in addresses:
            current = getattr(owner, attr)
            if current and not flags.is_set(flag) and key not in cfg:
                setattr(owner, attr, with_port(current, 0))
        if not flags.is_set("web-port"):  # --web's page too
            flags["web-port"].value.set("0")
    return options, bool(flags["ready-json"].value.value)


def main(argv: list[str]) -> int:
    """``nsqbox up [flags]``: the whole box in one process."""
    defaults = BoxOptions()
    flags = up_flag_set(defaults)
    command = parse_nsqd_command(argv, flags, defaults.nsqd)
    if isinstance(command, int):
        return command
    if command.show_version:
        print(version_line())
        return 0
    try:
        options, ready_json = resolve_up_options(flags, command.options)
        options.validate()
        web = web_flags(flags)
    except (ConfigError, ValueError) as exc:
        return fatal(f"failed to start nsqbox - {exc}", BOX_PREFIX)
    if flags["tui"].value.value:
        if flags["web"].value.value:
            return fatal("failed to start nsqbox - use --tui or --web, not both", BOX_PREFIX)
        # Textual loads only here: the TUI hosts the box as a trio guest run.
        from nsqbox.run.up_tui import run_box_tui

        return run_box_tui(options, read_only=web.read_only)
    return run(options, ready_json=ready_json, web=web if flags["web"].value.value else None)


@dataclass(slots=True)
class _RunState:
    started: bool = False


def run(
    options: BoxOptions,
    *,
    ready_json: bool = False,
    label: str = "nsqbox up",
    web: WebFlags | None = None,
) -> int:
    """Run the box until SIGINT or SIGTERM (and its TUI as a web page with ``web``); the
    exit status."""
    import trio  # here, not at the top: ``nsqbox up -h`` should not pay for it

    from nsqbox.nsqd.domain.metadata import MetadataError
    from nsqbox.nsqd.domain.nsqd import ShutdownError

    handler = configure_logging(
        options.nsqd.log_level, options.nsqd.log_prefix, prefixes=LOG_PREFIXES
    )
    if options.nsqd_count > 1:
        handler.addFilter(NodeTag())
    state = _RunState()
    message: str | None = None
    prefix = options.nsqd.log_prefix  # an nsqd's failure, as nsqd words it
    interrupted = False
    try:
        trio.run(_run_until_signal, options, ready_json, label, state, web)
    except* KeyboardInterrupt:
        interrupted = True
    except* ShutdownError as group:  # each failure was logged already: a summary line
        message = str(first_error(group))
    except* MetadataError as group:
        message = f"failed to start nsqbox - failed to load metadata - {first_error(group)}"
    except* (OSError, ValueError) as group:
        if state.started:
            raise
        message = f"failed to start nsqbox - {first_error(group)}"
        prefix = BOX_PREFIX  # the box's: a port, an option, a file of any service
    if message is not None:
        return fatal(message, prefix)
    return 130 if interrupted else 0


async def _run_until_signal(
    options: BoxOptions, ready_json: bool, label: str, state: _RunState, web: WebFlags | None
) -> None:

    from nsqbox.process.service import serve_until_signalled
    from nsqbox.run.up_web import serve_web_tui

    async def start(nursery: trio.Nursery) -> None:
        addresses: BoxAddresses = await nursery.start(serve_box, options)
        ready = addresses.ready()
        banner = addresses.banner(label)
        if web is not None:
            url = await nursery.start(serve_web_tui, addresses, options, web)
            ready["tui_web_url"] = url
            lines = banner.splitlines(keepends=True)  # before the last, "running; Ctrl-C stops"
            lines.insert(-1, f"{label}: admin TUI in a browser at {url} (a TUI process per tab)\n")
            banner = "".join(lines)
        state.started = True
        sys.stderr.write(banner)
        sys.stderr.flush()
        if ready_json:
            print(json.dumps(ready), flush=True)
        # As ``nsqbox nsqd`` does: what start-up made (some 33,000 objects) lives as long as
        # the process; moved out of the collector's reach, a full collection (a pause every
        # publisher waits out) walks only what came after.
        gc.freeze()

    await serve_until_signalled(start, logger)
