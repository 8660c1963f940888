"""What one hub replica is told: :class:`HubConfig`, the settings ``gpufed controlplane`` parses
from its flags (gpufed/commands/controlplane.py) and :class:`~controlplane.hub.Hub` runs with.

The state dir, listen address and serving certificate; etcd (endpoints and their TLS, or an
embedded one, its space policy); authentication (anonymous requests, client certificates, service
account tokens, audit); the leader's controllers and its lease; the waste accounting; serving
limits; Services' address ranges. Plain values: nothing here starts anything.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from controlplane.apis.kube.serviceaccounttokens import DEFAULT_CLEAN_UP_PERIOD
from controlplane.apiserver.audit import AuditConfig
from controlplane.apiserver.auth.serviceaccountjwt import ServiceAccountOptions
from controlplane.apiserver.serviceallocation import (
    DEFAULT_SERVICE_CLUSTER_IP_RANGE,
    DEFAULT_SERVICE_NODE_PORT_RANGE,
    IPRange,
    PortRange,
)
from controlplane.apiserver.serving import ServingLimits
from controlplane.apiserver.watching import WatchLimits
from controlplane.controllers.context import ControllerSettings
from controlplane.leader.election import DEFAULT_TTL as DEFAULT_LEADER_LEASE_TTL
from controlplane.reports.rollups import DEFAULT_BUCKET_SECONDS as DEFAULT_WASTE_BUCKET_LENGTH
from controlplane.reports.sampling import DEFAULT_INTERVAL as DEFAULT_WASTE_SAMPLE_INTERVAL
from controlplane.storage.connecting import EtcdClientTls
from controlplane.storage.embedded import EtcdClientTransport
from controlplane.storage.etcd import DEFAULT_MAX_RESPONSE_BYTES
from controlplane.storage.spacekeeping import SpacePolicy

if TYPE_CHECKING:
    from controlplane.hub import Hub


@dataclass(frozen=True)
class HubConfig:
    state_dir: Path
    host: str = "127.0.0.1"
    port: int = 6443
    #: Empty: start an embedded etcd with its data under the state dir.
    etcd_endpoints: tuple[str, ...] = ()
    #: How the hub reaches its embedded etcd: a private Unix socket without TLS, or loopback TCP
    #: with TLS and client-certificate auth (for tools that must reach it over TCP).
    embedded_etcd_transport: EtcdClientTransport = EtcdClientTransport.UNIX
    #: CA and client certificate for https:// etcd endpoints (--etcd-cafile/--etcd-certfile/--etcd-keyfile).
    etcd_tls: EtcdClientTls | None = None
    #: The largest etcd response the hub accepts; list pages shrink to fit under it.
    etcd_max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    #: The embedded etcd's executable (--etcd-binary); None: the best etcd found (etcdbinary.find_etcd).
    etcd_binary: Path | None = None
    #: The etcd space checks and, for the embedded etcd, its quota and defragmentation (--etcd-defrag-*).
    etcd_space: SpacePolicy = field(default_factory=SpacePolicy)
    #: Extra names/addresses for the serving certificate the hub issues (with a provided
    #: certificate: names it is checked for, with a warning when missing).
    tls_hosts: tuple[str, ...] = ()
    #: A provided serving certificate (chain) and key; None: issue one from the hub's own CA.
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    #: The CA that signed tls_cert_file (advertised to clients, pinned by agents); None: the
    #: self-signed certificate that ends tls_cert_file.
    tls_ca_file: Path | None = None
    #: --client-ca-file: the CA client certificates are verified against; None: the hub's own CA
    #: when it issues its serving certificate, else no client certificates (apiserver/clientcertificates.py).
    client_ca_file: Path | None = None
    #: --anonymous-auth: a request without credentials to a public-info path, the dashboard or a
    #: monitoring path (/metrics, a single check, /debug/*: then RBAC's 403) is system:anonymous; else
    #: 401 (but for the CA, which joining agents fetch without credentials).
    anonymous_auth: bool = True
    #: --audit-policy-file, --audit-log-* and --audit-webhook-*: the audit backends (None: no auditing,
    #: as kube without a policy).
    audit: AuditConfig | None = None
    #: Seconds a cluster may miss heartbeats before it is Unknown.
    cluster_monitor_grace_period: float = 40.0
    #: Failover: the fraction of not-ready clusters (more than 2) that holds evictions back
    #: (controllers/disruption.py); with none Ready the hub evicts nothing.
    unhealthy_fleet_threshold: float = 0.55
    #: karmada-webhook's --allow-no-execute-taint-policy: a ClusterTaintPolicy may name a NoExecute
    #: taint (which evicts what a cluster runs); off, such a policy is refused.
    allow_no_execute_taint_policy: bool = False
    #: The leader's controllers: failover's default tolerations and graceful eviction timeout, the
    #: FederatedHPA sync period, Kueue's fair sharing and waitForPodsReady, federated quota
    #: enforcement, the unschedulable grace (their flags: gpufed/commands/controlplane.py).
    controllers: ControllerSettings = field(default_factory=ControllerSettings)
    #: TTL of the etcd lease behind controller leadership: a dead leader is replaced within it.
    leader_lease_ttl: int = DEFAULT_LEADER_LEASE_TTL
    #: kube's --legacy-service-account-token-clean-up-period (controllers/legacytokencleaning.py).
    legacy_token_clean_up_period: dt.timedelta = DEFAULT_CLEAN_UP_PERIOD
    #: kube's --cluster-signing-duration (None: its one year): the longest certificate a CSR gets.
    cluster_signing_duration: dt.timedelta | None = None
    #: kube's --service-account-issuer (the first: the ``iss`` of TokenRequests' JWTs and of the discovery
    #: documents), --api-audiences, --service-account-jwks-uri, --service-account-signing-key-file and
    #: --service-account-key-file.
    service_accounts: ServiceAccountOptions = field(default_factory=ServiceAccountOptions)
    #: This replica's name in leader election (empty: host-pid-random).
    identity: str = ""
    #: Extra route factories (e.g. the dashboard), given the running hub.
    extra_routes: tuple[Callable[[Hub], list[web.RouteDef]], ...] = field(default=())
    #: Seconds between two fleet samples of the waste accounting.
    waste_sample_interval: float = DEFAULT_WASTE_SAMPLE_INTERVAL
    #: Seconds in one fine bucket of the waste rollups (a divisor of a minute): the shortest report
    #: step and the alignment of the named report windows.
    waste_bucket_length: int = DEFAULT_WASTE_BUCKET_LENGTH
    #: Header timeout, pending connections and requests in flight (apiserver.serving).
    serving_limits: ServingLimits = field(default_factory=ServingLimits)
    #: What one watch may hold for a client that does not read, and how long before it is dropped.
    watch_limits: WatchLimits = field(default_factory=WatchLimits)
    #: Keep the last this many writes in full for ``/debug/writes`` (0: counters only).
    write_journal: int = 0
    #: The controllers', scheduler's and waste sampler's lists and watches served by the API's
    #: watch cache (each event decoded once for all watchers); False: each reads the store itself.
    cached_informers: bool = True
    #: Where Services' cluster IPs and node ports come from (--service-cluster-ip-range,
    #: --service-node-port-range).
    service_cluster_ips: IPRange = field(default_factory=lambda: IPRange.parse(DEFAULT_SERVICE_CLUSTER_IP_RANGE))
    service_node_ports: PortRange = field(default_factory=lambda: PortRange.parse(DEFAULT_SERVICE_NODE_PORT_RANGE))
