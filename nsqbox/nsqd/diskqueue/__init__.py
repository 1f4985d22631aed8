"""nsqd's disk queue (go-diskqueue): the files, the reader, the syncs and peeking at them."""
