"""The member agent's configuration: the ``gpufed agent`` flags, validated.

In: an ``argparse`` namespace (from :func:`add_arguments`) and, optionally, a cluster file (YAML
with provider, region, zone, tier, labels, pricing; flags win over the file). Out: an
immutable :class:`AgentConfig`. The bootstrap token comes from the environment variable
``GPUFED_BOOTSTRAP_TOKEN`` or a file (``--token-file``), which do not show in process
listings as a ``--bootstrap-token`` flag does.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from controlplane.apis.cluster_v1alpha1 import NodeScoring
from controlplane.apis.constants import BOOTSTRAP_TOKEN_ENV
from controlplane.apis.durations import go_duration_error, go_duration_seconds
from controlplane.gojson import parse_bool
from controlplane.yamlfile import yaml_problem
from member_agent import electing
from member_agent.clusterfile import CLUSTER_FILE_FIELDS, ClusterFacts
from member_agent.dcgm import MAX_SCRAPE_BYTES
from member_agent.holding import DEFAULT_HOLD_SECONDS
from member_agent.trust import TrustError, normalize_hash
from member_agent.tunnel import MAX_BACKOFF, MIN_BACKOFF

TOKEN_ENV = BOOTSTRAP_TOKEN_ENV
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


class AgentConfig(ClusterFacts):
    model_config = ConfigDict(frozen=True, extra="forbid")

    hub: str = Field(description="the hub's URL, e.g. https://hub.example:6443")
    hub_ca_hash: str | None = Field(default=None, description="sha256:<hex> of the hub CA's public key")
    bootstrap_token: SecretStr | None = None
    cluster_name: str
    kubeconfig: Path | None = Field(
        default=None, description="member kubeconfig; in-cluster config when absent"
    )
    state_dir: Path
    dcgm_url: str | None = None
    #: HOST:PORT to serve the agent's Prometheus /metrics on; None serves none.
    metrics_listen: str | None = None
    #: Keep a tunnel open to the hub that carries the cluster proxy (member_agent.tunnel).
    enable_proxy: bool = False
    #: Who proxied requests act as at the member: the hub user (impersonate) or the agent itself.
    proxy_identity: Literal["impersonate", "agent"] = "impersonate"
    #: The tunnel's first pause before reconnecting, doubled after each failure up to the maximum.
    proxy_reconnect_initial_backoff: float = Field(default=MIN_BACKOFF, gt=0)
    proxy_reconnect_max_backoff: float = Field(default=MAX_BACKOFF, gt=0)

    heartbeat_interval: float = Field(default=10.0, gt=0)
    lease_duration_seconds: int = Field(default=40, gt=0)
    report_interval: float = Field(default=30.0, gt=0)
    report_debounce: float = Field(default=1.0, ge=0)
    #: The member's discovery is read this often for ``status.apiEnablements`` (and after a Work
    #: with a CRD is applied); a report follows only when the list changed.
    api_enablements_interval: float = Field(default=60.0, gt=0)
    dcgm_interval: float = Field(default=15.0, gt=0)
    #: A DCGM page larger than this is refused (and the refusal logged), so a misbehaving
    #: exporter cannot exhaust the agent's memory; a 1,000-node cluster's page is about 15 MiB.
    dcgm_max_bytes: int = Field(default=MAX_SCRAPE_BYTES, gt=0)
    #: Work statuses follow member events (pods, applied workloads) after this pause, which lets
    #: a burst of events settle into one status write.
    status_debounce: float = Field(default=0.2, ge=0)
    #: A Work status saying *applied, replicas starting* is held back up to this long, so a
    #: workload ready within it costs one status write (:mod:`member_agent.holding`); 0: none.
    status_hold: float = Field(default=DEFAULT_HOLD_SECONDS, ge=0, le=60)
    #: Every Work's status is recomputed this often anyway (events missed by a watch, kinds the
    #: agent does not watch), a tenth more or less at random, as the Work resync.
    status_resync_interval: float = Field(default=60.0, gt=0)
    resync_interval: float = Field(default=300.0, gt=0)
    request_timeout: float = Field(default=30.0, gt=0)
    #: The member's API is probed (``/readyz``, ``/livez``) this often ...
    member_probe_interval: float = Field(default=10.0, gt=0)
    #: ... and reported unhealthy (Ready False) once its probes have failed for this long
    #: (Karmada's ``--cluster-failure-threshold``).
    member_failure_threshold: float = Field(default=30.0, ge=0)
    #: Leader election among the agents of this cluster (:mod:`member_agent.electing`), with
    #: karmada-agent's flags and defaults; off, the agent runs at once (one agent per cluster).
    leader_elect: bool = False
    leader_elect_lease_duration: float = Field(default=electing.DEFAULT_LEASE_DURATION, gt=0)
    leader_elect_renew_deadline: float = Field(default=electing.DEFAULT_RENEW_DEADLINE, gt=0)
    leader_elect_retry_period: float = Field(default=electing.DEFAULT_RETRY_PERIOD, gt=0)
    leader_elect_resource_namespace: str = electing.DEFAULT_NAMESPACE
    #: This candidate's name in the Lease (``holderIdentity``); None: host name and a unique suffix.
    leader_elect_identity: str | None = None
    #: How the member's scheduler ranks nodes (its NodeResourcesFit scoring strategy), reported as
    #: ``Cluster.status.nodeScoring`` (``packingHintsScope: SpreadingMembers`` reads it). kube's default.
    member_node_scoring: NodeScoring = NodeScoring.LEAST_ALLOCATED

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, value: str) -> str:
        if len(value) > 63 - len("gpufed-es-") or not _DNS_LABEL.match(value):
            raise ValueError(
                "must be a DNS-1123 label of at most 53 characters (lower case letters, digits and '-',"
                " starting and ending with a letter or digit)"
            )
        return value

    @field_validator("metrics_listen")
    @classmethod
    def _metrics_listen(cls, value: str | None) -> str | None:
        if value is not None:
            from member_agent.metrics import parse_listen

            parse_listen(value)
        return value

    @field_validator("hub")
    @classmethod
    def _hub(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL, e.g. https://hub.example:6443")
        return value.rstrip("/")

    @field_validator("hub_ca_hash")
    @classmethod
    def _ca_hash(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return normalize_hash(value)
        except TrustError as exc:
            raise ValueError(str(exc)) from exc

    @model_validator(mode="after")
    def _backoff(self) -> AgentConfig:
        if self.proxy_reconnect_max_backoff < self.proxy_reconnect_initial_backoff:
            raise ValueError(
                f"--proxy-reconnect-max-backoff ({self.proxy_reconnect_max_backoff:g}) must not be less than "
                f"--proxy-reconnect-initial-backoff ({self.proxy_reconnect_initial_backoff:g})"
            )
        return self

    @model_validator(mode="after")
    def _election(self) -> AgentConfig:
        duration = self.leader_elect_lease_duration
        if self.leader_elect and duration != int(duration):
            nearest = " or ".join(f"{n}s" for n in sorted({max(1, math.floor(duration)), math.ceil(duration)}))
            raise ValueError(
                f"--leader-elect-lease-duration {duration:g}s is not a whole number of seconds (the Lease's "
                f"leaseDurationSeconds holds whole seconds): give {nearest}"
            )
        if self.leader_elect and (
            problem := electing.timing_problem(
                self.leader_elect_lease_duration, self.leader_elect_renew_deadline, self.leader_elect_retry_period
            )
        ):
            raise ValueError(
                f"{problem} (--leader-elect-lease-duration {self.leader_elect_lease_duration:g}s, "
                f"--leader-elect-renew-deadline {self.leader_elect_renew_deadline:g}s, "
                f"--leader-elect-retry-period {self.leader_elect_retry_period:g}s)"
            )
        return self

    @field_validator("leader_elect_resource_namespace")
    @classmethod
    def _lease_namespace(cls, value: str) -> str:
        if len(value) > 63 or not _DNS_LABEL.match(value):
            raise ValueError("must be a namespace name: a DNS-1123 label of at most 63 characters")
        return value

    @field_validator("pricing")
    @classmethod
    def _pricing(cls, value: dict[str, float]) -> dict[str, float]:
        for product, price in value.items():
            if price < 0:
                raise ValueError(f"price for {product} must not be negative")
        return value


def _pairs(values: list[str] | None, *, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _go_bool(text: str) -> bool:
    value = parse_bool(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")
    return value


def _go_duration(text: str) -> float:
    if (error := go_duration_error(text)) is not None:
        raise argparse.ArgumentTypeError(f"{error} (a duration such as 15s or 1m)")
    return go_duration_seconds(text)


def _election_arguments(parser: argparse.ArgumentParser) -> None:
    """karmada-agent's (component-base's) leader election flags."""
    parser.add_argument(
        "--leader-elect", type=_go_bool, nargs="?", const=True, metavar="true|false",
        help="elect one leader among the agents of this cluster on a Lease in the member before running; only "
        "the leader joins, reports, applies Works and holds the proxy tunnel; for two or more agents of one "
        "cluster (default false: a member API outage longer than the renew deadline ends the leader's term)",
    )
    parser.add_argument(
        "--leader-elect-lease-duration", type=_go_duration, metavar="DURATION",
        help="how long followers wait after the leader's last renewal before taking the Lease over (default 15s)",
    )
    parser.add_argument(
        "--leader-elect-renew-deadline", type=_go_duration, metavar="DURATION",
        help="how long the leader keeps trying to renew, whatever makes it fail, before it stops leading "
        "(default 10s)",
    )
    parser.add_argument(
        "--leader-elect-retry-period", type=_go_duration, metavar="DURATION",
        help="time between tries to acquire or renew the Lease (default 2s)",
    )
    parser.add_argument(
        "--leader-elect-resource-namespace", metavar="NAMESPACE",
        help=f"the member namespace of the Lease {electing.LEASE_PREFIX}<cluster> (default {electing.DEFAULT_NAMESPACE})",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``gpufed agent`` flags."""
    parser.add_argument("--hub", required=True, help="hub URL, e.g. https://hub.example:6443")
    parser.add_argument(
        "--hub-ca-hash", help="sha256:<hex> of the hub CA's public key (from the join command)"
    )
    parser.add_argument(
        "--token-file", type=Path, help=f"file holding the one-time join token (or set ${TOKEN_ENV})"
    )
    parser.add_argument(
        "--bootstrap-token",
        help=f"one-time join token on the command line, visible in process listings: prefer ${TOKEN_ENV} "
        "or --token-file",
    )
    parser.add_argument("--cluster-name", required=True, help="this member's name in the federation")
    parser.add_argument(
        "--kubeconfig", type=Path, help="member cluster kubeconfig (default: in-cluster config)"
    )
    parser.add_argument("--state-dir", type=Path, required=True, help="where the agent keeps its credential")
    parser.add_argument(
        "--dcgm-url", help="dcgm-exporter metrics URL, e.g. http://dcgm-exporter:9400/metrics"
    )
    parser.add_argument(
        "--cluster-file", type=Path, help="YAML with provider, region, zone, tier, labels, pricing"
    )
    parser.add_argument("--provider", help="onprem, aws, gcp, azure, ... (default onprem)")
    parser.add_argument("--region")
    parser.add_argument("--zone")
    parser.add_argument("--tier", type=int, help="overflow order, lower first")
    parser.add_argument("--label", action="append", metavar="KEY=VALUE", help="Cluster label (repeatable)")
    parser.add_argument(
        "--price", action="append", metavar="PRODUCT=USD", help="$ per GPU-hour by gpu.product (repeatable)"
    )
    parser.add_argument(
        "--heartbeat-interval", type=float, help="seconds between Lease renewals (default 10)"
    )
    parser.add_argument(
        "--report-interval", type=float, help="seconds between periodic capacity reports (default 30)"
    )
    parser.add_argument(
        "--api-enablements-interval",
        type=float,
        help="seconds between readings of the member's discovery for the Cluster's status.apiEnablements; "
        "a report follows only when the list changed (default 60)",
    )
    parser.add_argument("--dcgm-interval", type=float, help="seconds between DCGM scrapes (default 15)")
    parser.add_argument(
        "--dcgm-max-bytes",
        type=int,
        help="largest DCGM page the agent reads; a larger one is refused and logged (default 67108864, 64 MiB)",
    )
    parser.add_argument(
        "--status-resync-interval",
        type=float,
        help="seconds between recomputing every Work's status, a tenth more or less at random; member changes "
        "update it at once (default 60)",
    )
    parser.add_argument(
        "--resync-interval",
        type=float,
        help="seconds between applying every Work again, repairing what changed in the member (default 300)",
    )
    parser.add_argument(
        "--status-hold",
        type=float,
        help="seconds a Work status saying 'applied, replicas starting' is held back, so a workload ready "
        "within it costs one status write; one that is not is reported after it (default 1, 0: no hold)",
    )
    parser.add_argument(
        "--member-probe-interval",
        type=float,
        help="seconds between probes of the member API's /readyz and /livez (default 10)",
    )
    parser.add_argument(
        "--member-failure-threshold",
        type=float,
        help="seconds the member API's probes must fail before the cluster is reported not ready (default 30)",
    )
    parser.add_argument(
        "--member-node-scoring",
        choices=[scoring.value for scoring in NodeScoring],
        help="how the member's scheduler ranks the nodes a pod fits on (its NodeResourcesFit scoringStrategy; "
        "FragmentationAware: a GPU-fragmentation scorer), reported as the Cluster's status.nodeScoring; a policy's "
        "packingHintsScope: SpreadingMembers packs only LeastAllocated members (default LeastAllocated, kube's)",
    )
    parser.add_argument(
        "--metrics-listen", metavar="HOST:PORT", help="serve Prometheus /metrics here (default: not served)"
    )
    parser.add_argument(
        "--enable-proxy",
        action="store_true",
        default=None,
        help="keep a tunnel open to the hub carrying the cluster proxy (default: off)",
    )
    parser.add_argument(
        "--proxy-identity",
        choices=["impersonate", "agent"],
        help="proxied requests act at the member as the hub user (impersonate, the default; the agent's member "
        "identity needs the impersonate verb) or as the agent itself",
    )
    parser.add_argument(
        "--proxy-reconnect-initial-backoff",
        type=float,
        metavar="SECONDS",
        help=f"seconds the proxy tunnel first waits before reconnecting to the hub, doubled after each failure "
        f"(default {MIN_BACKOFF:g})",
    )
    parser.add_argument(
        "--proxy-reconnect-max-backoff",
        type=float,
        metavar="SECONDS",
        help=f"the longest the proxy tunnel waits between reconnects (default {MAX_BACKOFF:g})",
    )
    _election_arguments(parser)


def _cluster_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ValueError(f"cannot read cluster file {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"cluster file {path} is not valid YAML: {yaml_problem(exc)}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"cluster file {path} must be a mapping")
    unknown = sorted(set(data) - set(CLUSTER_FILE_FIELDS))
    if unknown:
        raise ValueError(
            f"cluster file {path}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(CLUSTER_FILE_FIELDS))}"
        )
    return data


def _bootstrap_token(ns: argparse.Namespace) -> str | None:
    """The join token from --bootstrap-token, --token-file or the environment (one of them)."""
    flag: str | None = getattr(ns, "bootstrap_token", None)
    path: Path | None = getattr(ns, "token_file", None)
    if flag and path:
        raise ValueError("give the join token once: --bootstrap-token or --token-file, not both")
    if path is not None:
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read the join token from --token-file {path}: {exc}") from exc
        if not token:
            raise ValueError(f"--token-file {path} is empty")
        return token
    return flag or os.environ.get(TOKEN_ENV) or None


def config_from_args(ns: argparse.Namespace) -> AgentConfig:
    """An :class:`AgentConfig` from parsed flags (raises ``ValueError`` with a readable message)."""
    values: dict[str, Any] = {}
    if getattr(ns, "cluster_file", None):
        values.update(_cluster_file(ns.cluster_file))
    labels = dict(values.get("labels") or {})
    labels.update(_pairs(getattr(ns, "label", None), flag="--label"))
    pricing: dict[str, Any] = dict(values.get("pricing") or {})
    for product, price in _pairs(getattr(ns, "price", None), flag="--price").items():
        try:
            pricing[product] = float(price)
        except ValueError as exc:
            raise ValueError(f"--price {product}={price}: not a number") from exc
    values["labels"] = labels
    values["pricing"] = pricing
    for flag in ("provider", "region", "zone", "tier"):
        if getattr(ns, flag, None) is not None:
            values[flag] = getattr(ns, flag)
    intervals = {
        "heartbeat_interval": "heartbeat_interval",
        "report_interval": "report_interval",
        "api_enablements_interval": "api_enablements_interval",
        "dcgm_interval": "dcgm_interval",
        "dcgm_max_bytes": "dcgm_max_bytes",
        "status_resync_interval": "status_resync_interval",
        "resync_interval": "resync_interval",
        "status_hold": "status_hold",
        "member_probe_interval": "member_probe_interval",
        "member_failure_threshold": "member_failure_threshold",
        "member_node_scoring": "member_node_scoring",
        "enable_proxy": "enable_proxy",
        "proxy_identity": "proxy_identity",
        "proxy_reconnect_initial_backoff": "proxy_reconnect_initial_backoff",
        "proxy_reconnect_max_backoff": "proxy_reconnect_max_backoff",
        "leader_elect": "leader_elect",
        "leader_elect_lease_duration": "leader_elect_lease_duration",
        "leader_elect_renew_deadline": "leader_elect_renew_deadline",
        "leader_elect_retry_period": "leader_elect_retry_period",
        "leader_elect_resource_namespace": "leader_elect_resource_namespace",
    }
    for attr, key in intervals.items():
        if getattr(ns, attr, None) is not None:
            values[key] = getattr(ns, attr)
    if ns.kubeconfig is not None and not Path(ns.kubeconfig).is_file():
        raise ValueError(f"--kubeconfig {ns.kubeconfig}: no such file (the member cluster's kubeconfig)")
    token = _bootstrap_token(ns)
    return AgentConfig(
        hub=ns.hub,
        hub_ca_hash=ns.hub_ca_hash,
        bootstrap_token=SecretStr(token) if token else None,
        cluster_name=ns.cluster_name,
        kubeconfig=ns.kubeconfig,
        state_dir=ns.state_dir,
        dcgm_url=ns.dcgm_url,
        metrics_listen=getattr(ns, "metrics_listen", None),
        **values,
    )
