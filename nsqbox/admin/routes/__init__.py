"""The admin service's HTTP routes: nsqadmin's ``/api``, then nsqbox's, one module per feature."""
