"""contrib/go and contrib/node: the helper libraries' own test runners, on real boxes (#36).

Each test copies a helper into a temporary directory with the samples as
docs/testing-other-languages.md shows them (the doc's blocks are the files), and runs
``go test`` or ``node --test`` there with ``NSQBOX`` naming this environment's
``nsqbox``. Every helper starts its own ``nsqbox up --ephemeral-ports --ready-json`` once
per test package. A toolchain or a package that cannot be had here skips with the reason:
the packages (nsqjs, go-nsq) are fetched by scripts/test-tools.sh, so the tests only talk
to 127.0.0.1.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "testing-other-languages.md"
#: A generous bound for one runner (a box start is under a second; npm and go build more).
RUN_TIMEOUT = 600
_BLOCK = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```\n", re.S)


def doc_files() -> dict[str, str]:
    """The files the doc shows, by path under the repository."""
    return dict(_BLOCK.findall(DOC.read_text()))


def nsqbox_program() -> str:
    program = Path(sys.executable).with_name("nsqbox")
    if program.exists():
        return str(program)
    found = shutil.which("nsqbox")
    if found is None:
        pytest.skip("no nsqbox program beside this Python or on PATH")
    return found


def run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env={**os.environ, "NSQBOX": nsqbox_program(), **env},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def copy_with_doc_files(helper: str, tmp_path: Path) -> Path:
    """``contrib/<helper>`` in ``tmp_path``, with the doc's files written over it."""
    target = tmp_path / helper
    source = ROOT / "contrib" / helper
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("node_modules"))
    if (source / "node_modules").is_dir():  # installed by scripts/test-tools.sh
        (target / "node_modules").symlink_to(source / "node_modules")
    for name, text in doc_files().items():
        prefix = f"contrib/{helper}/"
        if name.startswith(prefix):
            (target / name[len(prefix) :]).write_text(text)
    return target


def test_the_docs_show_the_files_the_runners_run() -> None:
    files = doc_files()
    assert sorted(files) == [
        "contrib/go/example/example_test.go",
        "contrib/node/test/sample.test.js",
    ]
    for name, text in files.items():
        assert (ROOT / name).read_text() == text, f"{name} differs from the doc's block"
    assert "testing-other-languages.md" in (ROOT / "docs" / "testing.md").read_text()


def test_the_go_helper_with_go_test(tmp_path: Path) -> None:
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain (Debian's golang-go; scripts/test-tools.sh installs it)")
    helper = copy_with_doc_files("go", tmp_path)
    # The helper needs only the standard library: nothing may be fetched.
    go_env = {"GOPROXY": "off", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    first, second = (
        subprocess.Popen(
            ["go", "test", "-count=1", "-v", "."],
            cwd=helper,
            env={**os.environ, "NSQBOX": nsqbox_program(), **go_env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)  # two packages' runs at once: two boxes, nothing shared
    )
    try:
        outputs = [process.communicate(timeout=RUN_TIMEOUT)[0] for process in (first, second)]
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.kill()
                process.communicate()
    for process, output in zip((first, second), outputs, strict=True):
        assert process.returncode == 0, output
        assert "--- PASS: TestACaptureSurvivesARestartAndACrash" in output
        assert "--- PASS: TestTwoBoxesShareNothing" in output
        assert re.search(r"^ok\s+nsqboxtest\b", output, re.M), output


def test_the_go_nsq_sample_with_go_test(tmp_path: Path) -> None:
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain (Debian's golang-go; scripts/test-tools.sh installs it)")
    sample = copy_with_doc_files("go", tmp_path) / "example"
    offline = {"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
    fetched = run(["go", "mod", "download"], sample, **offline)  # from the module cache only
    if fetched.returncode != 0:
        why = (fetched.stderr.strip().splitlines() or ["no reason given"])[-1]
        pytest.skip(f"go-nsq is not in Go's module cache (scripts/test-tools.sh): {why}")
    result = run(["go", "test", "-count=1", "-v", "."], sample, **offline)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--- PASS: TestADeferredMessageFallsDueWhenTheClockMoves" in result.stdout


def test_the_node_helper_with_nsqjs_and_node_test(tmp_path: Path) -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("no Node.js and npm on this machine")
    if not (ROOT / "contrib" / "node" / "node_modules" / "nsqjs").is_dir():
        pytest.skip("nsqjs is not installed in contrib/node (scripts/test-tools.sh installs it)")
    helper = copy_with_doc_files("node", tmp_path)
    result = run(["node", "--test"], helper)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# pass 3" in result.stdout
    assert "# fail 0" in result.stdout
