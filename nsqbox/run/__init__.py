"""The box (every service in one trio nursery) and the ``nsqbox up`` command."""
