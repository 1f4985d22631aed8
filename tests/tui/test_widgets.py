"""The table that updates in place (cells change, the cursor stays on its row), and the rate
plot."""

from __future__ import annotations

import asyncio

from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.widgets import Sparkline

from nsqbox.admin.tui.widgets import Column, RatePlot, Row, StatsTable

COLUMNS = (Column("name", "Name"), Column("depth", "Depth"))


def rows(**depths: int) -> list[Row]:
    return [Row(name, (name, Text(str(depth)))) for name, depth in depths.items()]


def where(table: StatsTable) -> tuple[str | None, int]:
    """The cursor: its row's key and index."""
    return (table.selected_key, table.cursor_row)


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield StatsTable(id="t")


def test_show_updates_cells_in_place_and_follows_the_selected_row() -> None:
    async def main() -> None:
        app = TableApp()
        async with app.run_test() as pilot:
            table = app.query_one(StatsTable)
            assert table.selected_key is None
            table.show(COLUMNS, rows(b=1, c=2))
            await pilot.press("down")
            assert where(table) == ("c", 1)
            before = table.ordered_rows
            table.show(COLUMNS, rows(b=1, c=5))  # same rows: one cell rewritten
            assert table.ordered_rows == before
            assert table.cells("c") == ("c", "5")
            assert where(table) == ("c", 1)
            table.show(COLUMNS, rows(a=0, b=1, c=5))  # a row before it: the cursor follows
            assert where(table) == ("c", 2)
            table.show(COLUMNS, rows(a=0, b=1))  # its row goes: the cursor stays in place
            assert where(table) == ("b", 1)
            table.show(COLUMNS, [])  # a refresh that failed empties it for a while
            table.show(COLUMNS, [])
            table.show(COLUMNS, rows(a=0, b=1))  # back: the cursor is on its row again
            assert where(table) == ("b", 1)
            table.show((*COLUMNS, Column("extra", "Extra")), [Row("a", ("a", "0", "x"))])
            assert (table.keys, len(table.columns), table.cells("a")) == (["a"], 3, ("a", "0", "x"))
            assert table.select("a")
            assert not table.select("zzz")
            await pilot.pause()

    asyncio.run(main())


def test_rows_drawn_before_the_table_measured_them_are_drawn_again_at_full_width() -> None:
    # a busy process can draw new rows before the table is idle and measures them: they were
    # kept drawn at the header's width ("memor" for "memory") until some later change
    async def main() -> None:
        app = TableApp()
        async with app.run_test(size=(80, 10)) as pilot:
            table = app.query_one(StatsTable)
            table.show(COLUMNS, [])
            await pilot.pause()
            table.show(COLUMNS, [Row("r", ("127.0.0.1:4151", Text("restock shelf 4")))])
            assert "restock" not in table.render_line(1).text  # drawn before measuring
            await pilot.pause()
            assert "127.0.0.1:4151  restock shelf 4" in table.render_line(1).text
            # a cell that grows, drawn before it is measured, likewise
            table.show(COLUMNS, [Row("r", ("127.0.0.1:4151", Text("restock shelf 4 and 5")))])
            table.render_line(1)
            await pilot.pause()
            assert "restock shelf 4 and 5" in table.render_line(1).text

    asyncio.run(main())


class PlotApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RatePlot(id="rate")


def test_the_rate_plot_draws_a_baseline_until_it_has_two_rates() -> None:
    """One rate scaled to itself would be a wall of full blocks: a peak that never was."""

    async def main() -> None:
        app = PlotApp()
        async with app.run_test(size=(40, 6)) as pilot:
            plot = app.query_one(RatePlot)
            spark = app.query_one(Sparkline)

            async def drawn(series: list[float | None]) -> list[str]:
                plot.plot("topic orders", series)
                await pilot.pause()
                region = Region(0, 0, spark.size.width, spark.size.height)
                return [strip.text for strip in spark.render_lines(region)]

            baseline = [" " * 38, "▁" * 38]
            assert await drawn([]) == baseline
            assert await drawn([250.0]) == baseline  # the first rate
            assert await drawn([None, 250.0]) == baseline
            caption = app.query_one(".rate-caption").render()
            assert str(caption).startswith("topic orders: 250/s now")
            lines = await drawn([125.0, 250.0])  # two rates: a plot, scaled to them
            assert lines[0].rstrip("█").isspace()  # the higher rate, full height, on the right
            assert lines[0].endswith("█")

    asyncio.run(main())
