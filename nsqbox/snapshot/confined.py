"""Snapshots saved on request into one directory: a file name, never a path.

The admin service's ``POST /api/snapshot?file=NAME`` writes a snapshot on the box's machine
for whoever its Host and Origin checks let through (the TUI, in a terminal or a browser tab).
So a request names a file, not a path, and the file can only be a new snapshot in the box's
directory:

- :func:`check_save_name`: 1 to :data:`MAX_SAVE_NAME` characters of ASCII letters, digits,
  ``.``, ``_`` and ``-``, starting with a letter or a digit, ending in ``.jsonl`` or
  ``.jsonl.gz``: no ``/``, no ``..``, no hidden file, nothing but a snapshot's name.
- :func:`open_confined`: the directory is opened once and the file made in it by descriptor
  (``openat``), first as a hidden part file (``O_CREAT | O_EXCL | O_NOFOLLOW``, mode 0600: it
  holds every message body), linked to its name only once complete (``linkat``, which never
  replaces anything): an existing file, or a link, of that name is never overwritten nor
  followed (``FileExistsError``), and a failed save leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import IO, Final

from .files import is_gzip_name

__all__ = [
    "MAX_SAVE_NAME",
    "SUFFIXES",
    "SaveNameError",
    "check_save_name",
    "default_save_name",
    "open_confined",
]

#: The longest name a snapshot may be saved under.
MAX_SAVE_NAME: Final = 128
#: What a saved snapshot's name ends in (``.gz``: gzip).
SUFFIXES: Final = (".jsonl", ".jsonl.gz")
_NAME: Final = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_SAVE_NAME - 1}}}\Z")


class SaveNameError(ValueError):
    """A name a snapshot may not be saved under; the message says why."""


def check_save_name(name: str) -> str:
    """``name`` when a snapshot may be saved under it, else :class:`SaveNameError`."""
    if not _NAME.match(name):
        raise SaveNameError(
            f"a file name of 1 to {MAX_SAVE_NAME} letters, digits, '.', '_' and '-', "
            "starting with a letter or a digit (not a path)"
        )
    if not name.endswith(SUFFIXES):
        raise SaveNameError("a snapshot's name ends in .jsonl or .jsonl.gz (gzip)")
    return name


def default_save_name(when: datetime) -> str:
    """``nsqbox-20261128-051200.jsonl.gz``: the name proposed for a snapshot saved ``when``."""
    return f"nsqbox-{when:%Y%m%d-%H%M%S}.jsonl.gz"


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


@contextlib.contextmanager
def open_confined(directory: str | os.PathLike[str], name: str) -> Iterator[IO[bytes]]:
    """A binary stream for a new snapshot ``name`` in ``directory`` (gzip for ``.gz``).

    SaveNameError for a name :func:`check_save_name` refuses; FileExistsError when the
    directory has anything of that name, checked before the block runs and again when the
    file takes its name; OSError when it cannot be written. On an error nothing is left.
    """
    check_save_name(name)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _exists(name, dir_fd):
            raise FileExistsError(f"{os.path.join(directory, name)} exists")
        part = f".{name}.{uuid.uuid4().hex[:12]}.part"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        raw = os.fdopen(os.open(part, flags, 0o600, dir_fd=dir_fd), "wb")
        try:
            if is_gzip_name(name):
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6) as gz:
                    yield gz  # type: ignore[misc]
            else:
                yield raw
            raw.close()
            os.link(part, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        finally:
            raw.close()
            with contextlib.suppress(OSError):
                os.unlink(part, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
