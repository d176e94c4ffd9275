"""Prometheus metrics, named after kube-scheduler's."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

SCHEDULE_ATTEMPTS = Counter(
    "scheduler_schedule_attempts_total",
    "Number of attempts to schedule pods, by the result.",
    ["result", "profile"],
)
ATTEMPT_DURATION = Histogram(
    "scheduler_scheduling_attempt_duration_seconds",
    "Scheduling attempt latency in seconds (algorithm and assume; binding is asynchronous).",
    ["result", "profile"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
)
POD_SCHEDULING_DURATION = Histogram(
    "scheduler_pod_scheduling_duration_seconds",
    "E2e latency for a pod being scheduled, from first attempt to bound, which may include several attempts.",
    ["attempts"],
    buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60, 120, 300),
)


class PendingPods(Collector):
    """scheduler_pending_pods{queue}, read from the queue at scrape time, so that it stays true while
    the loop sleeps and pods come and go (the scrape runs on the event loop, which owns the queue)."""

    def __init__(self) -> None:
        self._source: Callable[[], Mapping[str, int]] | None = None

    def track(self, source: Callable[[], Mapping[str, int]]) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "scheduler_pending_pods", "Number of pending pods, by the queue type.", labels=["queue"]
        )
        if self._source is not None:
            for queue, count in self._source().items():
                family.add_metric([queue], count)
        yield family


PENDING_PODS = PendingPods()
REGISTRY.register(PENDING_PODS)
PREEMPTION_ATTEMPTS = Counter(
    "scheduler_preemption_attempts_total", "Total preemption attempts in the cluster till now."
)
PREEMPTION_VICTIMS = Histogram(
    "scheduler_preemption_victims", "Number of selected preemption victims.", buckets=(1, 2, 4, 8, 16, 32, 64)
)
BINDS = Counter("kubesched_binds_total", "Binding requests by outcome.", ["outcome"])
LEADER_STATUS = Gauge(
    "leader_election_master_status",
    "Whether this process is the leader of the lease `name` (1) or a follower (0).",
    ["name"],
)
SHADOW_EVALUATIONS = Counter(
    "kubesched_shadow_evaluations_total",
    "Pods a Shadow policy evaluated beside the active one, by how its decision compared.",
    ["policy", "verdict"],
)
SHADOW_EVALUATION_DURATION = Histogram(
    "kubesched_shadow_evaluation_seconds",
    "Time a Shadow policy took per pod (the cost of shadowing, spent in the scheduling executor).",
    ["policy"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1),
)
EVENT_LOOP_LAG = Histogram(
    "kubesched_event_loop_lag_seconds",
    "How late the event loop ran a timer: the time it was blocked (watch events, handlers, replies).",
    buckets=(0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
)
EVENT_LOOP_LAG_MAX = Gauge("kubesched_event_loop_lag_max_seconds", "The longest event loop lag seen so far.")
EVENT_LOOP_BUSY_MAX = Gauge(
    "kubesched_event_loop_busy_max_seconds",
    "The longest event loop lag that the loop thread's own CPU time could account for (the rest of "
    "a lag is waiting for a core or the GIL).",
)
