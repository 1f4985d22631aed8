"""nsqd.dat exactly as real nsqd writes it, and nsqbox's deferred-deadline side file."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest

from nsqbox.nsqd.domain.metadata import (
    ChannelMetadata,
    DeferredDeadline,
    Metadata,
    MetadataError,
    TopicMetadata,
    encode_metadata,
    load_deferred,
    load_metadata,
    persist_metadata,
    save_deferred,
)

GOLDEN = Path(__file__).parent / "golden"

# What tests/nsqd/golden/nsqd.dat describes.
EXAMPLE = Metadata(
    topics=(
        TopicMetadata(
            "orders",
            paused=True,
            channels=(ChannelMetadata("archive"), ChannelMetadata("billing", paused=True)),
        ),
        TopicMetadata("audit.log"),
    ),
)


def test_persist_matches_go_json_marshal(tmp_path: Path) -> None:
    persist_metadata(str(tmp_path), EXAMPLE)
    assert (tmp_path / "nsqd.dat").read_bytes() == (GOLDEN / "nsqd.dat").read_bytes()
    assert os.listdir(tmp_path) == ["nsqd.dat"]
    assert (tmp_path / "nsqd.dat").stat().st_mode & 0o777 == 0o600


def test_no_topics_is_null_as_a_nil_slice(tmp_path: Path) -> None:
    persist_metadata(str(tmp_path), Metadata())
    assert (tmp_path / "nsqd.dat").read_bytes() == (GOLDEN / "nsqd_no_topics.dat").read_bytes()
    assert load_metadata(str(tmp_path)) == Metadata()


def test_load_golden(tmp_path: Path) -> None:
    (tmp_path / "nsqd.dat").write_bytes((GOLDEN / "nsqd.dat").read_bytes())
    assert load_metadata(str(tmp_path)) == EXAMPLE


def test_load_missing_file_is_a_fresh_start(tmp_path: Path) -> None:
    assert load_metadata(str(tmp_path)) is None


def test_load_is_as_lenient_as_json_unmarshal(tmp_path: Path) -> None:
    (tmp_path / "nsqd.dat").write_text(
        '{"topics":[{"name":"a","extra":1,"channels":[{"name":"c"}]},{"paused":true}],'
        '"version":"1.2.1","more":{}}'
    )
    assert load_metadata(str(tmp_path)) == Metadata(
        topics=(
            TopicMetadata("a", channels=(ChannelMetadata("c"),)),
            TopicMetadata("", paused=True),  # the caller skips invalid names, as nsqd does
        ),
        version="1.2.1",
    )


def test_load_takes_null_as_json_unmarshal_does(tmp_path: Path) -> None:
    # json.Unmarshal leaves a struct at its zero value for null: nsqd starts with no topics,
    # and a null topic or channel has an empty name (skipped by the caller as invalid)
    (tmp_path / "nsqd.dat").write_text("null")
    assert load_metadata(str(tmp_path)) == Metadata(version="")
    (tmp_path / "nsqd.dat").write_text('{"topics":[null,{"name":"a","channels":[null]}]}')
    assert load_metadata(str(tmp_path)) == Metadata(
        topics=(TopicMetadata(""), TopicMetadata("a", channels=(ChannelMetadata(""),))),
        version="",
    )


@pytest.mark.parametrize("content", [b"", b"{", b'{"topics":{}}', b'{"topics":[{"paused":"y"}]}'])
def test_load_unparseable_raises_nsqds_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "nsqd.dat").write_bytes(content)
    fn = re.escape(str(tmp_path / "nsqd.dat"))
    with pytest.raises(MetadataError, match=f"^failed to parse metadata in {fn} - "):
        load_metadata(str(tmp_path))


def test_load_unreadable_raises_nsqds_error(tmp_path: Path) -> None:
    (tmp_path / "nsqd.dat").mkdir()
    with pytest.raises(MetadataError, match=r"^failed to read metadata from "):
        load_metadata(str(tmp_path))


def test_persist_writes_a_temp_file_then_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nsqd.dat").write_text("old")
    renames: list[tuple[str, str]] = []
    real_rename = os.rename

    def spy_rename(src: str, dst: str) -> None:
        renames.append((src, dst))
        assert Path(src).read_bytes() == (GOLDEN / "nsqd.dat").read_bytes()
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", spy_rename)
    persist_metadata(str(tmp_path), EXAMPLE)
    monkeypatch.undo()
    [(src, dst)] = renames
    fn = str(tmp_path / "nsqd.dat")
    assert dst == fn
    assert re.fullmatch(re.escape(fn) + r"\.\d+\.tmp", src)
    assert (tmp_path / "nsqd.dat").read_bytes() == (GOLDEN / "nsqd.dat").read_bytes()


def test_failed_rename_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_rename(src: str, dst: str) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(OSError, match="Input/output error"):
        persist_metadata(str(tmp_path), EXAMPLE)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


def test_go_html_escaping() -> None:
    meta = Metadata(topics=(TopicMetadata("a<b>&c\u2028"),))
    assert encode_metadata(meta) == (
        b'{"topics":[{"name":"a\\u003cb\\u003e\\u0026c\\u2028","paused":false,"channels":null}],'
        b'"version":"1.3.0"}'
    )


# -- deferred deadlines ----------------------------------------------------------------------

DEADLINES = [
    DeferredDeadline("orders", "archive", b"0123456789abcdef", 1_700_000_000_000_000_000),
    DeferredDeadline("orders", "billing", b"fedcba9876543210", 1_700_000_000_500_000_000),
]


def test_save_deferred_matches_golden(tmp_path: Path) -> None:
    save_deferred(str(tmp_path), DEADLINES)
    assert (tmp_path / "nsqbox.deferred.dat").read_bytes() == (
        GOLDEN / "nsqbox.deferred.dat"
    ).read_bytes()
    assert os.listdir(tmp_path) == ["nsqbox.deferred.dat"]


def test_load_deferred_is_keyed_by_topic_channel_and_id(tmp_path: Path) -> None:
    (tmp_path / "nsqbox.deferred.dat").write_bytes((GOLDEN / "nsqbox.deferred.dat").read_bytes())
    assert load_deferred(str(tmp_path)) == {
        ("orders", "archive", b"0123456789abcdef"): 1_700_000_000_000_000_000,
        ("orders", "billing", b"fedcba9876543210"): 1_700_000_000_500_000_000,
    }


def test_deferred_ids_round_trip_any_bytes(tmp_path: Path) -> None:
    odd = DeferredDeadline("t", "c", bytes(range(240, 256)), 5)
    save_deferred(str(tmp_path), [odd])
    assert load_deferred(str(tmp_path)) == {("t", "c", bytes(range(240, 256))): 5}


def test_save_no_deadlines_removes_the_file(tmp_path: Path) -> None:
    save_deferred(str(tmp_path), DEADLINES)
    save_deferred(str(tmp_path), [])
    assert os.listdir(tmp_path) == []
    save_deferred(str(tmp_path), iter(()))  # and nothing to remove is fine
    assert load_deferred(str(tmp_path)) == {}


def test_load_deferred_skips_bad_lines(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    golden = (GOLDEN / "nsqbox.deferred.dat").read_bytes()
    (tmp_path / "nsqbox.deferred.dat").write_bytes(
        b'not json\n{"topic":"t"}\n\n{"topic":"t","channel":"c","id":"\\u0100","deadline_ns":1}\n'
        + golden
    )
    with caplog.at_level(logging.WARNING):
        loaded = load_deferred(str(tmp_path))
    assert len(loaded) == 2
    assert [r.getMessage().split(" of ")[0] for r in caplog.records] == [
        "skipping line 1",
        "skipping line 2",
        "skipping line 4",
    ]
