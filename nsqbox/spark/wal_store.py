"""Where the write-ahead log's objects live: a POSIX directory, or an object store by URL.

The log (:mod:`.wal`) needs five things of its storage: create an object whole
unless it exists, read one, list the sequence "directories", replace the small
``committed`` mark, and remove a sequence. Two stores give them:

- :class:`LocalStore` (a path): a segment is written aside, ``fsync``ed and
  hard-linked into its name, which fails when the name exists; the directory
  is ``fsync``ed too. Exactly one writer wins, and a crash leaves the old state
  or the new one.
- :class:`ObjectStore` (``s3://``, ``s3a://``, ``gs://``, ``abfs://``,
  ``abfss://``, ``hdfs://``, through :mod:`pyarrow.fs`): an object store has no
  rename and no fsync, and needs neither. A PUT (a single one, or a multipart
  upload completed at its end) makes an object visible whole or not at all, and
  durable when it returns; S3, GCS and Azure Blob read their own writes and list
  them at once (strong consistency). So each segment is one object written
  once, from a buffer that holds all of it. HDFS shows a file while it is being
  written, so there the object is written under a temporary name and renamed
  (atomic in the namenode). Without a create-if-absent (pyarrow has none), two
  attempts of the same task could both write the name: the segment carries its
  writer's attempt id, and a writer that reads back another attempt's segment
  has lost (see ``docs/spark.md`` for the window that remains).

URLs take pyarrow's options in their query string (``s3://bucket/wal?region=eu-west-1``,
``?endpoint_override=minio:9000&scheme=http`` for an S3-compatible store), and
credentials from the usual places (environment, instance profile, workload
identity). ``s3a://`` and ``s3n://`` (Hadoop's names) are read as ``s3://``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = ["LocalStore", "ObjectStore", "Store", "is_url", "open_store"]

#: Schemes read through pyarrow.fs (Hadoop's S3 names mapped to ``s3``).
_SCHEMES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "gcs": "gs"}
_SCHEMES |= {"abfs": "abfs", "abfss": "abfss", "hdfs": "hdfs", "viewfs": "viewfs"}


def is_url(root: str) -> bool:
    """True for a URL of a store other than the local filesystem (``file://`` is local)."""
    scheme, sep, _ = root.partition("://")
    return bool(sep) and scheme.lower() != "file"


class Store(Protocol):
    """The operations the write-ahead log needs of its storage (paths relative to its root)."""

    def create(self, name: str, data: bytes) -> bool:
        """Write ``data`` as ``name`` whole unless it exists; False if it existed."""

    def get(self, name: str) -> bytes | None:
        """The object's bytes, or None when there is none."""

    def children(self) -> list[str]:
        """The names directly under the root (objects and "directories")."""

    def replace(self, name: str, data: bytes) -> None:
        """Write ``data`` as ``name``, replacing what was there, whole or not at all."""

    def remove_tree(self, name: str) -> None:
        """Remove ``name`` and everything under it (nothing there: nothing done)."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalStore:
    """A directory of a POSIX filesystem (local, or shared such as NFS)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        text = os.fspath(root)
        self.root = Path(text[len("file://") :] if text.startswith("file://") else text)

    def create(self, name: str, data: bytes) -> bool:
        """Written aside, fsynced, then hard-linked into its name (fails when it exists)."""
        target = self.root / name
        if target.exists():
            return False
        directory = target.parent
        if not directory.is_dir():
            directory.mkdir(parents=True, exist_ok=True)
            _fsync_dir(directory.parent)
        draft = directory / f".{target.name}.{uuid.uuid4().hex}.tmp"
        try:
            with open(draft, "wb") as raw:
                raw.write(data)
                raw.flush()
                os.fsync(raw.fileno())
            try:
                os.link(draft, target)  # atomic, and never replaces an existing segment
            except FileExistsError:
                return False
            _fsync_dir(directory)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                draft.unlink()

    def get(self, name: str) -> bytes | None:
        """The file's bytes, or None."""
        try:
            return (self.root / name).read_bytes()
        except FileNotFoundError:
            return None

    def children(self) -> list[str]:
        """The names in the root directory."""
        if not self.root.is_dir():
            return []
        return [p.name for p in self.root.iterdir()]

    def replace(self, name: str, data: bytes) -> None:
        """Written aside, then renamed over ``name``."""
        self.root.mkdir(parents=True, exist_ok=True)
        draft = self.root / f".{name}.{uuid.uuid4().hex}.tmp"
        draft.write_bytes(data)
        os.replace(draft, self.root / name)

    def remove_tree(self, name: str) -> None:
        """``rm -r``, errors ignored (a concurrent trim)."""
        shutil.rmtree(self.root / name, ignore_errors=True)


class ObjectStore:
    """A prefix of an object store (or HDFS), through :mod:`pyarrow.fs`."""

    def __init__(self, url: str) -> None:
        import pyarrow.fs as pafs

        scheme, _, rest = url.partition("://")
        mapped = _SCHEMES.get(scheme.lower())
        if mapped is None:
            raise ValueError(f"walPath: no filesystem for {scheme}:// (s3, gs, abfs, hdfs)")
        filesystem, path = pafs.FileSystem.from_uri(f"{mapped}://{rest}")
        self.fs: pafs.FileSystem = filesystem
        self.root = path.rstrip("/")
        #: HDFS shows a file while it is written: write aside and rename there.
        self.rename = mapped in ("hdfs", "viewfs")

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def _exists(self, path: str) -> bool:
        import pyarrow.fs as pafs

        return bool(self.fs.get_file_info(path).type != pafs.FileType.NotFound)

    def _write(self, path: str, data: bytes) -> None:
        if self.rename:
            draft = f"{path}.{uuid.uuid4().hex}.tmp"
            with self.fs.open_output_stream(draft) as out:
                out.write(data)
            self.fs.move(draft, path)
            return
        # one stream, closed once: a single PUT, or a multipart upload completed at close
        with self.fs.open_output_stream(path) as out:
            out.write(data)

    def create(self, name: str, data: bytes) -> bool:
        """Written whole unless it exists (checked first: see the module docstring)."""
        path = self._path(name)
        if self._exists(path):
            return False
        self._write(path, data)
        return True

    def get(self, name: str) -> bytes | None:
        """The object's bytes, or None."""
        try:
            with self.fs.open_input_file(self._path(name)) as source:
                return bytes(source.read())
        except FileNotFoundError:
            return None

    def children(self) -> list[str]:
        """The names under the prefix (S3's common prefixes are its "directories")."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.root, allow_not_found=True, recursive=False)
        return [info.base_name for info in self.fs.get_file_info(selector)]

    def replace(self, name: str, data: bytes) -> None:
        """One PUT: the object is replaced whole."""
        self._write(self._path(name), data)

    def remove_tree(self, name: str) -> None:
        """Delete every object under ``name``."""
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_dir(self._path(name))


def open_store(root: str) -> LocalStore | ObjectStore:
    """The store of a ``walPath``: a URL through pyarrow.fs, else a local directory."""
    return ObjectStore(root) if is_url(root) else LocalStore(root)
