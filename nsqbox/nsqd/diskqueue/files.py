"""File-level helpers of the disk queue: names, the meta file, and repairs when opening one.

:func:`load_state` reads ``<name>.diskqueue.meta.dat`` and checks it against the data files
before the queue trusts it. go-diskqueue takes the meta file at its word; a meta file that
contradicts the files (a crash, a disk error, a hand edit) then leaves it stuck: a depth that
never drains, a reader past the writer, or a writer that overwrites records nobody read. The
repairs, each logged as one line:

- no meta file, or one that cannot be read or parsed, negative numbers, a read position past
  the write position, or data files outside ``[readFileNum, writeFileNum]``: the meta file is
  not believed; the queue reads every data file from its start and writes after the last one
  (records may be delivered again; none are lost or overwritten);
- a depth other than 0 with the reader at the writer: depth 0 (go-diskqueue's
  checkTailCorruption, done at open instead of after the next read that never comes);
- a write file longer than ``writePos`` (records written after the last meta sync) or shorter
  (truncated): writes go to a new file, the reader salvages the old one;
- a depth of 0 or less with records left to read: depth is counted from the files.
"""

from __future__ import annotations

import logging
import os
import re
import struct

import msgspec

log = logging.getLogger("nsqbox.nsqd.diskqueue")

_LEN = struct.Struct(">i")

# go-diskqueue's retrieveMetaData uses fmt.Fscanf("%d\n%d,%d\n%d,%d\n"); %d tolerates leading
# blanks and a sign, newlines must match.
META_RE = re.compile(
    rb"[ \t]*([+-]?\d+)\n[ \t]*([+-]?\d+),[ \t]*([+-]?\d+)\n[ \t]*([+-]?\d+),[ \t]*([+-]?\d+)\n?"
)


class QueueState(msgspec.Struct):
    """The five numbers go-diskqueue persists in the meta file."""

    depth: int = 0
    read_file_num: int = 0
    read_pos: int = 0
    write_file_num: int = 0
    write_pos: int = 0

    @property
    def at_tail(self) -> bool:
        """The reader is where the writer is: nothing left to read."""
        return (self.read_file_num, self.read_pos) == (self.write_file_num, self.write_pos)

    def meta_text(self) -> bytes:
        """The meta file's contents for this state."""
        return (
            f"{self.depth}\n{self.read_file_num},{self.read_pos}\n"
            f"{self.write_file_num},{self.write_pos}\n"
        ).encode()


def data_file_name(data_path: str, name: str, num: int) -> str:
    """Path of data file number ``num`` of queue ``name``."""
    return os.path.join(data_path, f"{name}.diskqueue.{num:06d}.dat")


def meta_file_name(data_path: str, name: str) -> str:
    """Path of the meta file of queue ``name``."""
    return os.path.join(data_path, f"{name}.diskqueue.meta.dat")


def data_file_numbers(data_path: str, name: str) -> list[int]:
    """Numbers of the ``<name>.diskqueue.NNNNNN.dat`` files in ``data_path``, sorted."""
    prefix = f"{name}.diskqueue."
    try:
        names = os.listdir(data_path)
    except OSError:
        return []
    nums = []
    for fn in names:
        if fn.startswith(prefix) and fn.endswith(".dat"):
            middle = fn[len(prefix) : -len(".dat")]
            if middle.isdigit():
                nums.append(int(middle))
    return sorted(nums)


def count_records(path: str, pos: int, size: int, min_size: int, max_size: int) -> int:
    """Whole, plausible records between ``pos`` and ``size`` in ``path``.

    Stops at the first length prefix outside ``[min_size, max_size]`` or record that ends past
    ``size``, as the reader would.
    """
    if size <= pos:
        return 0
    try:
        with open(path, "rb") as f:
            f.seek(pos)
            data = f.read(size - pos)
    except OSError:
        return 0
    count = 0
    off = 0
    while off + 4 <= len(data):
        (length,) = _LEN.unpack_from(data, off)
        if length < min_size or length > max_size:
            break
        off += 4 + length
        if off > len(data):
            break
        count += 1
    return count


def _file_size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def count_unread(data_path: str, name: str, state: QueueState, min_size: int, max_size: int) -> int:
    """Records between the read and the write position, counted in the files that exist."""
    total = 0
    for num in data_file_numbers(data_path, name):
        if num < state.read_file_num or num > state.write_file_num:
            continue
        path = data_file_name(data_path, name, num)
        start = state.read_pos if num == state.read_file_num else 0
        end = state.write_pos if num == state.write_file_num else _file_size(path) or 0
        total += count_records(path, start, end, min_size, max_size)
    return total


def load_state(data_path: str, name: str, min_size: int, max_size: int) -> QueueState:
    """The queue's state from its meta file, repaired where it contradicts the data files."""
    fn = meta_file_name(data_path, name)
    try:
        with open(fn, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return _recover(data_path, name, min_size, max_size, "no metadata")
    except OSError as exc:
        log.error("DISKQUEUE(%s) failed to retrieveMetaData - %s", name, exc)
        return _recover(data_path, name, min_size, max_size, "unreadable metadata")
    match = META_RE.match(raw)
    if match is None:
        log.error("DISKQUEUE(%s) failed to retrieveMetaData - %r", name, raw[:80])
        return _recover(data_path, name, min_size, max_size, "unparseable metadata")
    state = QueueState(*(int(g) for g in match.groups()))
    read = (state.read_file_num, state.read_pos)
    write = (state.write_file_num, state.write_pos)
    nums = data_file_numbers(data_path, name)
    why = ""
    if min(*read, *write) < 0:
        why = f"negative position in {fn}"
    elif read > write:
        why = f"read position {read[0]},{read[1]} past write position {write[0]},{write[1]}"
    elif nums and (nums[0] < read[0] or nums[-1] > write[0]):
        why = f"data files {nums[0]}-{nums[-1]} outside {read[0]}-{write[0]}"
    if why:
        log.error("DISKQUEUE(%s) metadata corruption: %s", name, why)
        return _recover(data_path, name, min_size, max_size, "corrupt metadata")
    if state.at_tail and state.depth != 0:
        what = "negative depth at tail" if state.depth < 0 else "positive depth at tail"
        log.error(
            "DISKQUEUE(%s) %s (%d), metadata corruption, resetting 0", name, what, state.depth
        )
        state.depth = 0
    _check_write_file(data_path, name, state, min_size, max_size)
    if not state.at_tail and state.depth <= 0:
        depth = count_unread(data_path, name, state, min_size, max_size)
        if depth != state.depth:
            msg = "DISKQUEUE(%s) depth %d with records left to read, counted %d in the files"
            log.error(msg, name, state.depth, depth)
            state.depth = depth
    return state


def _check_write_file(
    data_path: str, name: str, state: QueueState, min_size: int, max_size: int
) -> None:
    """Move writes to a new file when the write file does not end at ``write_pos``."""
    path = data_file_name(data_path, name, state.write_file_num)
    size = _file_size(path)
    if size is None:
        size = 0
        if state.write_pos == 0:
            return  # not created yet: the normal state after a roll
    if state.write_pos < size:
        # Not synced at the last shutdown (the process was killed): records written after the
        # meta sync are still in the file. As go-diskqueue, write to a new file and let the
        # reader salvage the old one; unlike it, count them, so that depth is right.
        msg = "DISKQUEUE(%s) %s metadata writePos %d < file size of %d, skipping to new file"
        log.warning(msg, name, path, state.write_pos, size)
        state.depth += count_records(path, state.write_pos, size, min_size, max_size)
    elif state.write_pos > size:
        # Truncated (or gone): writing at write_pos would leave a hole the reader takes for a
        # corrupt record, and lose what is written after it.
        msg = "DISKQUEUE(%s) %s metadata writePos %d > file size of %d, skipping to new file"
        log.error(msg, name, path, state.write_pos, size)
    else:
        return
    state.write_file_num += 1
    state.write_pos = 0


def _recover(data_path: str, name: str, min_size: int, max_size: int, why: str) -> QueueState:
    """A state that reads every data file from its start and writes after the last one.

    go-diskqueue would start over at file 0 and overwrite the files; nsqbox reads them instead
    (so --mem-queue-size 0 loses nothing acknowledged when the process is killed before its
    first sync).
    """
    nums = data_file_numbers(data_path, name)
    if not nums:
        return QueueState()
    depth = 0
    for num in nums:
        path = data_file_name(data_path, name, num)
        depth += count_records(path, 0, _file_size(path) or 0, min_size, max_size)
    log.warning(
        "DISKQUEUE(%s) %s, recovered %d records from %d file(s)", name, why, depth, len(nums)
    )
    return QueueState(depth, nums[0], 0, nums[-1] + 1, 0)


def write_meta_file(path: str, tmp: str, state: QueueState) -> None:
    """Write the meta file atomically: temp file, fsync, rename (persistMetaData)."""
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, state.meta_text())
        try:
            os.fsync(fd)
        except OSError:
            pass  # go-diskqueue ignores the temp file's Sync error too
    finally:
        os.close(fd)
    try:
        os.rename(tmp, path)
    except OSError:
        try:  # leave no temp file behind
            os.remove(tmp)
        except OSError:
            pass
        raise
