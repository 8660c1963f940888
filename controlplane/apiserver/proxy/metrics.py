"""The cluster proxy's metrics on the hub's ``/metrics`` (the agent has its own, see member_agent).

* ``gpufed_proxy_requests_total{cluster,verb,code}`` -- proxied requests by the cluster they
  went to, the verb the authorizer saw (get, list, watch, create...) and the HTTP code answered
  (a stream cut short after its head counts with the head's code; a name that is no cluster
  counts as ``cluster=""``, so callers cannot grow the label set);
* ``gpufed_proxy_open_streams{cluster}`` -- proxied requests in flight;
* ``gpufed_proxy_relayed_bytes_total{cluster,direction}`` -- body bytes carried
  ``to_member`` (request bodies) and ``from_member`` (responses taken by the hub's clients);
* ``gpufed_proxy_tunnel_connected{cluster}`` -- 1 while the cluster's agent holds its tunnel open.

In: observations from :mod:`controlplane.apiserver.proxy.routes`. Out: the metrics in the
``CollectorRegistry`` given (the hub's).
"""

from __future__ import annotations

from functools import partial

from prometheus_client import CollectorRegistry, Counter, Gauge

NAMESPACE = "gpufed"


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        counter = partial(Counter, namespace=NAMESPACE, registry=registry)
        gauge = partial(Gauge, namespace=NAMESPACE, registry=registry)
        self.requests = counter(
            "proxy_requests", "Requests forwarded through the cluster proxy, by cluster, verb and HTTP code.",
            ["cluster", "verb", "code"],
        )
        self.open_streams = gauge(
            "proxy_open_streams", "Proxied requests in flight, by cluster.", ["cluster"],
        )
        self.relayed_bytes = counter(
            "proxy_relayed_bytes", "Body bytes carried through the cluster proxy (to_member, from_member).",
            ["cluster", "direction"],
        )
        self.tunnel_connected = gauge(
            "proxy_tunnel_connected", "1 while the cluster's agent holds its proxy tunnel open, else 0.",
            ["cluster"],
        )

    def connected(self, cluster: str, *, up: bool) -> None:
        self.tunnel_connected.labels(cluster).set(1 if up else 0)

    def request(self, cluster: str, verb: str, code: int) -> None:
        self.requests.labels(cluster, verb, str(code)).inc()

    def relayed(self, cluster: str, count: int, *, to_member: bool) -> None:
        if count > 0:
            self.relayed_bytes.labels(cluster, "to_member" if to_member else "from_member").inc(count)
