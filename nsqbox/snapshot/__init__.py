"""nsqbox's snapshot format: a box's state as JSON lines (docs/state.md). No trio, no sockets."""
