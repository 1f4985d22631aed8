"""Prometheus metrics: nsqd's ``/stats`` as metric families, for nsqd and the admin exporter.

nsqbox's own addition (NSQ has none: nsq#732). Both faces export the same families:

* nsqd's ``GET /metrics`` (:mod:`nsqbox.nsqd.routes.metrics`) collects its own node on each scrape;
* the admin service's ``GET /metrics`` (:mod:`nsqbox.admin.metrics`) reads every nsqd it sees
  over HTTP, real NSQ included, and labels each series with its ``node``.

The node's state goes through the one ``/stats`` schema (:mod:`nsqbox.wire.documents`) into a
:class:`~nsqbox.metrics.snapshot.NodeSnapshot`; :mod:`nsqbox.metrics.families` turns snapshots
into ``prometheus_client`` metric families and :mod:`nsqbox.metrics.exposition` writes them in
the format the scraper asks for. Those two modules import ``prometheus_client``; import them
on the first scrape, so that a process nobody scrapes never loads it. docs/metrics.md lists
the metrics.
"""
