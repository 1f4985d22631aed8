"""Go compatibility: NSQ's flags, config files and Go syntax, read as the Go programs read them."""
