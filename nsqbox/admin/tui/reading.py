"""What the views that read on demand share: the Journey, the Troubles and the Messages views.

Such a view does not follow the refreshes: it reads the nodes when it opens and again on
``r`` (:meth:`ReadingScreen.load`), in one exclusive worker, and shows what it read under a
summary line. A view says what it reads (:meth:`~ReadingScreen.fetch`) and takes the answer,
or nothing when the read failed (:meth:`~ReadingScreen.take`); the screen says "reading…"
until the first answer, and why a read failed (not connected yet, no node to ask, a
ClusterError) instead of the view's own summary, and stays up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from rich.text import Text
from textual import work
from textual.widgets import Static

from .base import ClusterScreen
from .safe import safe_text

if TYPE_CHECKING:
    from ..model import ClusterSnapshot
    from ..stats import Producer
    from .backend import Backend

__all__ = ["NodeAnswer", "ReadingScreen"]

R = TypeVar("R")


class NodeAnswer(Protocol):
    """What a node answered to a read (:class:`~nsqbox.admin.journal.NodeJournal`,
    :class:`~nsqbox.admin.peek.NodePeek`), as the summary uses it."""

    @property
    def node(self) -> str:
        """The node's name."""
        ...

    @property
    def supported(self) -> bool:
        """Whether the node has the routes read (real nsqd has not)."""
        ...

    @property
    def error(self) -> str:
        """Why the node did not answer ("" when it did)."""
        ...


class ReadingScreen(ClusterScreen, Generic[R]):
    """A view that reads the nodes on opening and on ``r``, then shows what it read (an
    answer of type ``R``) under a summary line, ``#summary``."""

    DEFAULT_CSS = """
    ReadingScreen #summary {
        padding: 0 1;
        height: auto;
    }
    """

    #: What the summary says while the view reads: ``reading`` or ``listing``.
    activity = "reading"

    def __init__(self) -> None:
        super().__init__()
        #: What each node answered to the last read.
        self.reports: Sequence[NodeAnswer] = []
        #: Why the last read failed (None when it did not).
        self.error: str | None = None
        #: Reads done (for tests: what was read is on screen once this grows).
        self.loads = 0
        self.reading = True

    def on_mount(self) -> None:
        """Read."""
        super().on_mount()
        self.main_table.focus()
        self.load()

    def load(self) -> None:
        """Read (again)."""
        self.reading = True
        self._read()

    def action_reload(self) -> None:
        """Read again."""
        self.load()

    @work(exclusive=True, group="read", exit_on_error=False)
    async def _read(self) -> None:
        self.redraw()
        backend, snapshot = self.host.backend, self.host.snapshot
        try:
            if backend is None or snapshot is None:
                raise LookupError("not connected to the cluster yet")
            answer = await self.fetch(backend, snapshot)
        except Exception as exc:  # ClusterError, InvalidCursor, a host gone: say it, stay up
            self.error = str(exc) or type(exc).__name__
            self.take(None)
        else:
            self.error = None
            self.take(answer)
        self.reading = False
        self.loads += 1
        self.redraw()

    async def fetch(self, backend: Backend, snapshot: ClusterSnapshot) -> R:
        """Read the nodes of ``snapshot`` through ``backend`` (raise to say why not)."""
        raise NotImplementedError

    def take(self, answer: R | None) -> None:
        """Keep ``answer`` and make the rows to show (``None``: the read failed)."""
        raise NotImplementedError

    @staticmethod
    def nodes_with(snapshot: ClusterSnapshot, topic: str) -> list[Producer]:
        """The nodes that answer and have ``topic`` (raises LookupError when none has)."""
        nodes = [n.producer for n in snapshot.nodes if n.ok and n.topic(topic)]
        if not nodes:
            raise LookupError(f"no node has topic {topic}")
        return nodes

    def publish_nodes(self) -> list[str]:
        """The nodes a copy of a message may be published to: those that answer."""
        snapshot = self.host.snapshot
        return [n.name for n in snapshot.nodes if n.ok] if snapshot is not None else []

    # -- the summary --------------------------------------------------------------------------

    @property
    def unsupported(self) -> bool:
        """Whether no node asked has the routes read (real nsqd)."""
        return bool(self.reports) and not any(r.supported for r in self.reports)

    @property
    def summary_title(self) -> str:
        """What the view shows, first on the summary line."""
        raise NotImplementedError

    def show_summary(self) -> None:
        """The summary: the title, then how the read went or what it found."""
        text = Text()
        text.append(self.summary_title, "bold")
        if self.reading and not self.loads:
            text.append(f" · {self.activity}…")
        elif self.error is not None:
            text.append(f"\n✗ {self.error}", "bold red")
        else:
            self.summarize(text)
        self.query_one("#summary", Static).update(safe_text(text))

    def summarize(self, text: Text) -> None:
        """Add what was read to the summary ``text``."""
        raise NotImplementedError

    def summarize_reports(self, text: Text) -> None:
        """Add "reading…" while reading again, then each node's failure on a line."""
        if self.reading:
            text.append(f" · {self.activity}…", "dim")
        for report in self.reports:
            if report.error:
                style = "dim" if not report.supported else "yellow"
                text.append(f"\n{report.node}: {report.error}", style)
