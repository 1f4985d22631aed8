"""The terminal sanitizer: every control character visible, everything printable kept."""

from __future__ import annotations

import doctest

import pytest

from nsqbox.process import terminal_text
from nsqbox.process.terminal_text import is_safe, visible, visible_bytes
from nsqbox.wire.errors import NSQError

CONTROLS = [chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)]]


@pytest.mark.parametrize("char", CONTROLS, ids=[f"U+{ord(c):04X}" for c in CONTROLS])
def test_every_control_is_shown_as_its_escape(char: str) -> None:
    shown = visible(f"a{char}b")
    assert shown == f"a\\x{ord(char):02x}b"
    assert is_safe(shown)
    assert not is_safe(char)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain ascii",
        "tab\tand\nnewline",
        "café",
        "naïve Ωμέγα",
        "東京 キュー",
        "🚀📦",
        "\xa0nbsp",
        "[red]x[/]",
    ],
)
def test_printable_text_is_kept_as_it_is(text: str) -> None:
    assert visible(text) is text
    assert is_safe(text)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),  # OSC 52: clipboard write
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # OSC 0: window title
        (
            "\x1b]8;;http://evil/\x1b\\ok\x1b]8;;\x1b\\",
            "\\x1b]8;;http://evil/\\x1b\\ok\\x1b]8;;\\x1b\\",
        ),
        ("\x1b[6n", "\\x1b[6n"),  # CSI 6n: the terminal would type its cursor position
        ("\x9b6n", "\\x9b6n"),  # C1 CSI
        ("line\r\x1b[2Kfake", "line\\x0d\\x1b[2Kfake"),  # CR: overwrite the line
    ],
    ids=["osc52", "osc0", "osc8", "csi6n", "c1-csi", "cr"],
)
def test_escape_sequences(raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_bytes_keep_utf8_and_show_controls_and_invalid_bytes() -> None:
    assert visible_bytes(b"plain") == b"plain"
    assert visible_bytes("café 東京 🚀\t\n".encode()) == "café 東京 🚀\t\n".encode()
    assert visible_bytes(b"\x1b[6n") == b"\\x1b[6n"
    assert visible_bytes(b"a\x9bb") == b"a\\x9bb"  # not UTF-8: the lone byte, visible
    assert visible_bytes("a\x9bb".encode()) == b"a\\x9bb"  # U+009B, as UTF-8
    assert visible_bytes(b"\x7f\xff") == b"\\x7f\\xff"


def test_docstring_examples() -> None:
    failed, attempted = doctest.testmod(terminal_text)
    assert attempted > 0
    assert failed == 0


def test_lone_surrogates_are_shown_as_the_bytes_they_carry() -> None:
    # a peer's byte that was not UTF-8, kept by surrogateescape, and a stray surrogate
    assert visible("F\udcffO") == "F\\xffO"
    assert visible("a\ud800b") == "a\\ud800b"
    assert visible("F\udcffO").encode("utf-8") == b"F\\xffO"


def test_an_error_frames_message_is_safe_to_log_and_its_frame_keeps_the_bytes() -> None:
    error = NSQError("E_INVALID", "invalid command F\udcff\x1bO")
    assert str(error) == "E_INVALID invalid command F\\xff\\x1bO"
    assert error.frame_body() == b"E_INVALID invalid command F\xff\x1bO"
