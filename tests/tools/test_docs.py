"""``nsqbox docs``: the documents ship in the package, so an install from a wheel can read them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from nsqbox.cli import main as nsqbox_main

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_the_list_names_every_document_with_its_title(capsys: pytest.CaptureFixture[str]) -> None:
    assert nsqbox_main(["docs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == sorted(p.stem for p in DOCS.glob("*.md"))
    testing = next(line for line in lines if line.startswith("testing "))
    assert testing.split(None, 1)[1] == "Testing your app with nsqbox"


@pytest.mark.parametrize("name", ["testing", "docs/testing.md", "testing.md"])
def test_a_document_prints_as_written(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert nsqbox_main(["docs", name]) == 0
    assert capsys.readouterr().out == (DOCS / "testing.md").read_text(encoding="utf-8")


def test_an_unknown_document_names_the_ones_there_are(capsys: pytest.CaptureFixture[str]) -> None:
    assert nsqbox_main(["docs", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no document 'nope'" in err
    assert "testing" in err


def test_path_is_the_folder_of_the_documents(capsys: pytest.CaptureFixture[str]) -> None:
    assert nsqbox_main(["docs", "--path"]) == 0
    assert Path(capsys.readouterr().out.strip()).resolve() == DOCS.resolve()


def test_the_wheel_carries_the_documents(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path), ROOT],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("nsqbox-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        packaged = {
            Path(n).name for n in names if n.startswith("nsqbox/docs/") and n.endswith(".md")
        }
        assert packaged == {p.name for p in DOCS.glob("*.md")}
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        assert "nsqbox docs" in archive.read(metadata).decode()  # the README says how
