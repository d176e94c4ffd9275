"""The settings of a scheduler process: one typed tree, grouped by concern, with documented defaults.

`kubesched run` builds it from its flags (`RunSettings.from_flags`); each setting names the flag
that sets it, and its default is that flag's. Durations are in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

from kubesched.kube.election import ElectionConfig, default_identity, default_namespace
from kubesched.runtime.queue import QueueSettings
from kubesched.runtime.scheduler import SchedulerSettings


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """How the process reaches the API server."""

    # None: $KUBECONFIG, else the in-cluster service account.
    kubeconfig: str | None = field(default=None, metadata={"flag": "--kubeconfig"})
    # Client-side requests per second (0: unlimited), and the burst above it.
    qps: float = field(default=50.0, metadata={"flag": "--kube-api-qps"})
    burst: int = field(default=100, metadata={"flag": "--kube-api-burst"})


@dataclass(frozen=True, slots=True)
class SchedulingSettings:
    """Which pods are ours, and how they are placed and bound."""

    scheduler_name: str = field(default="kubesched", metadata={"flag": "--scheduler-name"})
    # A legacy Policy file; None: kube-scheduler 1.20's default algorithm.
    policy_config_file: Path | None = field(default=None, metadata={"flag": "--policy-config-file"})
    batch_size: int = field(default=32, metadata={"flag": "--batch-size"})  # pods per executor call
    bind_concurrency: int = field(default=64, metadata={"flag": "--bind-concurrency"})  # binds in flight
    seed: int | None = field(default=None, metadata={"flag": "--seed"})  # tie-breaking among equal nodes
    # None: the policy file's (or the adaptive default); 0: adaptive; 100: every node.
    percentage_of_nodes_to_score: int | None = field(
        default=None, metadata={"flag": "--percentage-of-nodes-to-score"}
    )
    # A pod's backoff after its first failed attempt, doubling up to the maximum.
    pod_initial_backoff: float = field(default=1.0, metadata={"flag": "--pod-initial-backoff"})
    pod_max_backoff: float = field(default=10.0, metadata={"flag": "--pod-max-backoff"})

    def scheduler(self) -> SchedulerSettings:
        """The scheduling loop's settings."""
        return SchedulerSettings(self.scheduler_name, self.batch_size, self.bind_concurrency, self.seed)

    def queue(self) -> QueueSettings:
        """The queue's backoff timings."""
        return QueueSettings(self.pod_initial_backoff, self.pod_max_backoff)


@dataclass(frozen=True, slots=True)
class ElectionSettings:
    """Leader election over a Lease, with kube-scheduler's timings."""

    enabled: bool = field(default=True, metadata={"flag": "--leader-elect"})  # False: always schedule
    lease_duration: float = field(default=15.0, metadata={"flag": "--leader-elect-lease-duration"})
    renew_deadline: float = field(default=10.0, metadata={"flag": "--leader-elect-renew-deadline"})
    retry_period: float = field(default=2.0, metadata={"flag": "--leader-elect-retry-period"})
    # None: $POD_NAMESPACE, else kube-system.
    resource_namespace: str | None = field(
        default=None, metadata={"flag": "--leader-elect-resource-namespace"}
    )
    # None: the scheduler name.
    resource_name: str | None = field(default=None, metadata={"flag": "--leader-elect-resource-name"})
    # No flag: the pod's (or host's) name and a random suffix, drawn once per process.
    identity: str = field(default_factory=default_identity, compare=False)

    def config(self, scheduler_name: str) -> ElectionConfig | None:
        """The elector's configuration; None when election is off."""
        if not self.enabled:
            return None
        return ElectionConfig(
            namespace=self.resource_namespace or default_namespace(),
            name=self.resource_name or scheduler_name,
            identity=self.identity,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )


@dataclass(frozen=True, slots=True)
class ObservabilitySettings:
    """What the process tells about itself."""

    metrics_port: int = field(default=10251, metadata={"flag": "--metrics-port"})  # 0: no endpoint
    log_format: str = field(default="console", metadata={"flag": "--log-format"})  # or "json"
    log_level: str = field(default="info", metadata={"flag": "--log-level"})
    # How often the leader writes Shadow SchedulerPolicies' figures into their status.
    shadow_status_interval: float = field(default=10.0, metadata={"flag": "--shadow-status-interval"})


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """Keeping the cache true to the cluster."""

    # Between comparisons of the cache with a fresh listing of every kind it holds (0: never).
    reconcile_interval: float = field(default=60.0, metadata={"flag": "--cache-reconcile-interval"})


@dataclass(frozen=True, slots=True)
class ProcessSettings:
    """What the process runs on."""

    # "uvloop" or "asyncio" (the standard library's loop), for every loop of the process.
    event_loop: str = field(default="uvloop", metadata={"flag": "--event-loop"})


@dataclass(frozen=True, slots=True)
class RunSettings:
    """Everything `kubesched run` is told."""

    connection: ConnectionSettings = field(default_factory=ConnectionSettings)
    scheduling: SchedulingSettings = field(default_factory=SchedulingSettings)
    election: ElectionSettings = field(default_factory=ElectionSettings)
    observability: ObservabilitySettings = field(default_factory=ObservabilitySettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    process: ProcessSettings = field(default_factory=ProcessSettings)

    @classmethod
    def from_flags(cls, values: Mapping[str, Any]) -> RunSettings:
        """The settings from flag values by click parameter name (`kube_api_qps`); absent ones default."""
        changes: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            if name not in FLAGS:
                raise TypeError(f"no setting for the flag parameter {name!r}")
            section, setting = FLAGS[name]
            changes.setdefault(section, {})[setting] = value
        base = cls()
        return replace(
            base, **{section: replace(getattr(base, section), **c) for section, c in changes.items()}
        )


def parameter_name(flag: str) -> str:
    """A flag's click parameter name: `--kube-api-qps` -> `kube_api_qps`."""
    return flag.lstrip("-").replace("-", "_")


def _flags() -> dict[str, tuple[str, str]]:
    base = RunSettings()
    return {
        parameter_name(setting.metadata["flag"]): (section.name, setting.name)
        for section in fields(base)
        for setting in fields(getattr(base, section.name))
        if "flag" in setting.metadata
    }


# Every flag's click parameter name -> (section, setting) of RunSettings.
FLAGS: Final[Mapping[str, tuple[str, str]]] = _flags()
