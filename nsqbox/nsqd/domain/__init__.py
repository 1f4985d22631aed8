"""nsqd's domain: topics, channels, messages, timeouts, stats and faults; no sockets."""
