"""nsqd's HTTP routes: NSQ's own (``nsqd``), then nsqbox's, one module per feature."""
