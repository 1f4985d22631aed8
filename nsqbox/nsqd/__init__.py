"""nsqd: the broker. Domain objects first (topics, channels, queues), transports last."""
