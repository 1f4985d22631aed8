"""DirLock: one nsqd per --data-path, as nsq's internal/dirlock."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from nsqbox.nsqd.dirlock import DirLock, DirLockError

IN_USE = (
    "failed to lock data-path: cannot flock directory {path} - resource temporarily "
    "unavailable (possibly in use by another instance of nsqd)"
)


def test_second_lock_fails_until_unlocked(tmp_path: Path) -> None:
    first, second = DirLock(str(tmp_path)), DirLock(str(tmp_path))
    first.lock()
    assert first.locked
    with pytest.raises(DirLockError, match=f"^{re.escape(IN_USE.format(path=tmp_path))}$"):
        second.lock()
    assert not second.locked
    first.unlock()
    assert not first.locked
    second.lock()
    assert second.locked
    with pytest.raises(DirLockError):
        first.lock()
    second.unlock()


def test_unlock_without_lock_and_relock_are_harmless(tmp_path: Path) -> None:
    lock = DirLock(str(tmp_path))
    lock.unlock()
    lock.lock()
    lock.lock()  # already held by this object: nothing to do
    lock.unlock()
    lock.unlock()
    with DirLock(str(tmp_path)) as held:
        assert held.locked
    assert not held.locked


def test_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "nope"
    with pytest.raises(DirLockError) as info:
        DirLock(str(path)).lock()
    assert str(info.value) == f"failed to lock data-path: open {path}: no such file or directory"
    assert info.value.errno == 2


_HOLDER = """
import sys
from nsqbox.nsqd.dirlock import DirLock
lock = DirLock(sys.argv[1])
lock.lock()
print("locked", flush=True)
sys.stdin.read()
"""


def test_other_process_is_excluded_and_the_kernel_releases_on_death(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "locked\n"
        lock = DirLock(str(tmp_path))
        with pytest.raises(DirLockError, match="possibly in use by another instance of nsqd"):
            lock.lock()
        holder.kill()  # no unlock: the kernel drops the lock with the process
        holder.wait()
        lock.lock()
        assert lock.locked
        lock.unlock()
    finally:
        holder.kill()
        holder.wait()
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()
