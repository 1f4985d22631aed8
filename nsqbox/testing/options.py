"""The plugin's options table: ini keys ``nsqbox_<name>`` and flags ``--nsqbox-<name>``.

This is all the plugin imports at start-up, so it holds only names, help texts,
defaults and choices; :mod:`.config` parses the values when a fixture first needs them.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["MODES", "OPTIONS", "Option"]

#: ``nsqbox_mode`` values, and ``nsqbox_cleanup`` values.
MODES = ("thread", "subprocess", "noproc")
CLEANUPS = ("delete", "empty", "none")


class Option(NamedTuple):
    """One plugin option."""

    name: str
    help: str
    default: str
    choices: tuple[str, ...] = ()

    @property
    def ini(self) -> str:
        """The ini key (also the flag's ``dest``)."""
        return f"nsqbox_{self.name}"

    @property
    def flag(self) -> str:
        """The command-line flag."""
        return "--nsqbox-" + self.name.replace("_", "-")


#: Every option, in the order ``pytest --help`` lists them.
OPTIONS: tuple[Option, ...] = (
    Option(
        "mode",
        "where the session's servers run: thread (in this process), subprocess, or noproc "
        "(servers that already run, at the nsqbox_*_address options)",
        "thread",
        MODES,
    ),
    Option("nsqd_count", "how many nsqd the session box runs", "1"),
    Option("lookupd_count", "how many nsqlookupd the session box runs (0: none)", "1"),
    Option(
        "nsqd_args",
        "extra nsqd flags for the session box, e.g. '--msg-timeout=5s --mem-queue-size=100'",
        "",
    ),
    Option("lookupd_args", "extra nsqlookupd flags for the session box", ""),
    Option("start_timeout", "seconds to wait for the servers to start", "10"),
    Option("timeout", "default timeout (seconds) of wait_for, consume and capture", "10"),
    Option(
        "cleanup",
        "after each test: delete every topic, empty them, or none",
        "delete",
        CLEANUPS,
    ),
    Option("python", "the interpreter of subprocess mode (default: this one)", ""),
    Option(
        "data_path",
        "where started servers keep their data: auto (a directory in /dev/shm when there is "
        "one, removed afterwards; else pytest's temporary directory), tmp (pytest's), or a path",
        "auto",
    ),
    Option(
        "clock",
        "the session box's broker clock: real, or manual (moved by nsqbox.clock.advance)",
        "real",
        ("real", "manual"),
    ),
    Option(
        "seed",
        "a seed file (TOML: topics, channels, messages; docs/state.md) applied to the session "
        "box as it starts and after each test's cleanup; relative to the rootdir",
        "",
    ),
    Option("nsqd_tcp_address", "noproc: nsqd TCP address(es), comma-separated", "127.0.0.1:4150"),
    Option(
        "nsqd_http_address", "noproc: nsqd HTTP address(es), in the same order", "127.0.0.1:4151"
    ),
    Option(
        "lookupd_tcp_address", "noproc: nsqlookupd TCP address(es) ('' for none)", "127.0.0.1:4160"
    ),
    Option(
        "lookupd_http_address",
        "noproc: nsqlookupd HTTP address(es) ('' for none)",
        "127.0.0.1:4161",
    ),
)
