"""API aggregation on the hub, as kube-aggregator does it: the APIServices each replica watches
(:mod:`.registrations`), the requests and discovery it sends to extension API servers
(:mod:`.proxying`), and the front-proxy identity they trust (:mod:`.frontproxy`). The leader keeps
the local APIServices and the aggregated ones' Available condition
(:mod:`controlplane.controllers.apiservices`, :mod:`controlplane.controllers.apiserviceavailability`).
"""
