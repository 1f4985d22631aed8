"""What a running nsqbox process shares: its logs, signals and exit, text safe for a terminal."""
