"""nsqlookupd's HTTP routes: NSQ's own (``nsqlookupd``), then nsqbox's faults."""
