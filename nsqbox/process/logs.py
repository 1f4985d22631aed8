"""Logging set up the way nsqd logs: ``[nsqd] 2026/11/22 04:05:06.123456 INFO: message``.

Library code logs through stdlib loggers under ``nsqbox`` (``logging.getLogger(__name__)``).
Importing this module attaches a NullHandler there, so an application that embeds nsqbox hears
nothing unless it configures logging itself; the CLI calls :func:`configure_logging`.

Levels are nsqd's: debug, info, warn, error, fatal (``--log-level``; ``PUT /config/log_level``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import TextIO

#: The logger every nsqbox module logs under.
ROOT_LOGGER = "nsqbox"

#: nsqd's level names, lowest first, with their stdlib levels.
LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.CRITICAL,
}

# How nsqd's lg package spells each level in a line (WARN prints as "WARNING").
_LEVEL_TEXT = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "FATAL",
}

logging.getLogger(ROOT_LOGGER).addHandler(logging.NullHandler())


def parse_level(name: str) -> str:
    """Normalise a level name as nsqd's ``lg.ParseLogLevel`` does (case-insensitive).

    Returns the lower-case name; raises ValueError with nsqd's message otherwise.
    """
    lowered = name.lower()
    if lowered not in LEVELS:
        raise ValueError(f"invalid log level '{name}' (debug, info, warn, error, fatal)")
    return lowered


class NSQFormatter(logging.Formatter):
    """Format records as Go's ``log`` with ``Ldate|Ltime|Lmicroseconds`` and a prefix.

    ``prefixes`` maps logger names (and their children) to their own prefix, so one process
    running nsqd and lookupd can tag lines ``[nsqd]`` and ``[nsqlookupd]`` as the real daemons.
    """

    def __init__(self, prefix: str, prefixes: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.prefix = prefix
        # Longest names first, so the most specific logger wins.
        self._prefixes = sorted((prefixes or {}).items(), key=lambda kv: -len(kv[0]))

    def prefix_for(self, logger_name: str) -> str:
        """The prefix used for records from ``logger_name``."""
        for name, prefix in self._prefixes:
            if logger_name == name or logger_name.startswith(name + "."):
                return prefix
        return self.prefix

    def format(self, record: logging.LogRecord) -> str:
        """``<prefix><local date time.micros> <LEVEL>: <message>`` plus any traceback."""
        stamp = datetime.fromtimestamp(record.created).strftime("%Y/%m/%d %H:%M:%S.%f")
        level = _LEVEL_TEXT.get(record.levelno, record.levelname)
        line = f"{self.prefix_for(record.name)}{stamp} {level}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _StderrHandler(logging.Handler):
    """Write to ``stream``, or to whatever ``sys.stderr`` is at the time of each record.

    Looking stderr up late keeps working when something (pytest's capture, a TUI) swaps it.
    """

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__()
        self._stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = self._stream or sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


_installed: logging.Handler | None = None


def configure_logging(
    level: str,
    prefix: str = "[nsqd] ",
    *,
    stream: TextIO | None = None,
    prefixes: Mapping[str, str] | None = None,
) -> logging.Handler:
    """Send nsqbox's log records at ``level`` and above to stderr (or ``stream``), nsqd-style.

    Calling it again replaces the handler installed before. Returns the handler.
    """
    global _installed
    logger = logging.getLogger(ROOT_LOGGER)
    handler = _StderrHandler(stream)
    handler.setFormatter(NSQFormatter(prefix, prefixes))
    if _installed is not None:
        logger.removeHandler(_installed)
    logger.addHandler(handler)
    _installed = handler
    set_level(level)
    return handler


def set_level(level: str) -> None:
    """Change the level at run time (nsqd's ``PUT /config/log_level``)."""
    logging.getLogger(ROOT_LOGGER).setLevel(LEVELS[parse_level(level)])


def unconfigure_logging() -> None:
    """Remove the handler :func:`configure_logging` installed and reset the level."""
    global _installed
    logger = logging.getLogger(ROOT_LOGGER)
    if _installed is not None:
        logger.removeHandler(_installed)
        _installed = None
    logger.setLevel(logging.NOTSET)
