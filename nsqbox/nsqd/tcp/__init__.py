"""nsqd's TCP edge: a client's connection, protocol V2, negotiation, TLS and auth."""
