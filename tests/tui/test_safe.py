"""Wire text into widgets: Text, not markup, with control characters visible; bodies too."""

from __future__ import annotations

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text

from nsqbox.admin.tui.bodies import BodyKind, preview, render_body
from nsqbox.admin.tui.safe import safe, safe_cell, safe_text


def test_safe_is_text_with_controls_visible_and_no_markup() -> None:
    text = safe("[red]x[/]\x1b[6n", "bold")
    assert text.plain == "[red]x[/]\\x1b[6n"
    assert text.spans == []
    assert str(text.style) == "bold"


def test_safe_text_keeps_styles_and_is_the_same_object_when_clean() -> None:
    clean = Text("ok", style="dim")
    assert safe_text(clean) is clean
    text = Text()
    text.append("name ", "bold")
    text.append("a\x1bb\x9b", "red")
    out = safe_text(text)
    assert out.plain == "name a\\x1bb\\x9b"
    assert out.get_style_at_offset(Console(), 0).bold
    for offset in range(5, len(out.plain)):  # the escapes keep the red of the text around
        assert out.get_style_at_offset(Console(), offset).color.name == "red"


def test_safe_cell_turns_strings_into_one_line_text() -> None:
    cell = safe_cell("[b]ua[/b]\x07")
    assert isinstance(cell, Text)
    assert (cell.plain, cell.no_wrap) == ("[b]ua[/b]\\x07", True)


def test_bodies_show_c1_and_json_escaped_controls_visibly() -> None:
    assert preview("a\u009bb".encode()) == "a\\x9bb"
    kind, shown = render_body("a\u009b6n\r\nb".encode())
    assert kind is BodyKind.TEXT
    assert isinstance(shown, Text)
    assert shown.plain == "a\\x9b6n\nb"
    kind, shown = render_body(b'{"k": "\\u001b]52;c;eA==\\u0007 \\u009b"}')
    assert kind is BodyKind.JSON
    assert isinstance(shown, Syntax)
    assert "\x1b" not in shown.code
    assert "\x9b" not in shown.code
    assert "\\u001b]52;c;eA==\\u0007 \\x9b" in shown.code
