"""NSQ's command-line tools, nsqbox style: ``nsqbox pub`` (to_nsq), ``tail`` (nsq_tail),
``stat`` (nsq_stat).

They speak only NSQ's public protocols (TCP protocol V2, the lookupd and nsqd HTTP APIs), so they
work against any NSQ cluster as well as against ``nsqbox up``.
"""

from __future__ import annotations
