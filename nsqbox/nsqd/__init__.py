"""nsqd: the broker, in floors: ``diskqueue/``, ``domain/``, the edges ``tcp/`` and
``routes/``, then the server that assembles them."""
