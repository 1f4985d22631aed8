"""The admin TUI: nsqadmin in a terminal (``nsqbox tui``, ``nsqbox up --tui``).

Views of topics, channels, clients and nodes that refresh in place, and the admin actions —
pause, unpause, empty, delete, tombstone, create, publish, tail — behind confirmations. It reads
only the public HTTP APIs (through :mod:`nsqbox.admin.model`), so it works against nsqbox and
against any NSQ cluster. See docs/tui.md.

Modules: :mod:`.app` (the app; the only module that imports every view), :mod:`.backend`
(what it reads the cluster through), one module per view (:mod:`.topics`, :mod:`.topic`,
:mod:`.channel`, :mod:`.nodes`, :mod:`.tail`, :mod:`.logs`, :mod:`.messages` and
:mod:`.message`) over what they share (:mod:`.base`, :mod:`.operations`, :mod:`.detail`,
:mod:`.cells`, :mod:`.widgets`, :mod:`.format`), the messages a view posts to open another
(:mod:`.navigation`), the modals (:mod:`.modals`, :mod:`.help`), :mod:`.cli` (``nsqbox tui``;
:mod:`.web` for ``--web``), :mod:`.guest` (trio as a guest of Textual's asyncio loop), and
:mod:`.demo` / :mod:`.tour` (a fixed cluster and a walk through the views, for screenshots and
snapshot tests). The TUI knows nothing of the box: ``nsqbox up --tui`` is
:mod:`nsqbox.run.up_tui`, above both.
"""

from __future__ import annotations
