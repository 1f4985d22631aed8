"""What nsqd and nsqlookupd share of nsqbox's extras: broker time and the fault list."""
