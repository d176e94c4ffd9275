"""Prometheus metrics, named after kube-scheduler's."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

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


class ScrapedGauge(Collector):
    """A gauge family with one label, read from its source at scrape time, so that it stays true while
    nothing else runs (the scrape runs on the event loop, which owns the queue and the policies)."""

    def __init__(self, name: str, documentation: str, label: str) -> None:
        self.name = name
        self.documentation = documentation
        self.label = label
        self._source: Callable[[], Mapping[str, float]] | None = None

    def track(self, source: Callable[[], Mapping[str, float]]) -> None:
        """Read the values (label value -> value) from `source` from now on."""
        self._source = source

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=[self.label])
        if self._source is not None:
            for key, value in self._source().items():
                family.add_metric([key], float(value))
        yield family


PENDING_PODS = ScrapedGauge("scheduler_pending_pods", "Number of pending pods, by the queue type.", "queue")
REGISTRY.register(PENDING_PODS)
PREEMPTION_ATTEMPTS = Counter(
    "scheduler_preemption_attempts_total", "Total preemption attempts in the cluster till now."
)
PREEMPTION_VICTIMS = Histogram(
    "scheduler_preemption_victims", "Number of selected preemption victims.", buckets=(1, 2, 4, 8, 16, 32, 64)
)
BINDS = Counter("kubesched_binds_total", "Binding requests by outcome.", ["outcome"])
EVENTS = Counter(
    "kubesched_events_total",
    "Events the scheduler recorded, by what became of them: posted (a new Event), aggregated (counted "
    "into an Event already written), spam_filtered, dropped (the recorder's queue was full), failed.",
    ["result"],
)
for _result in ("posted", "aggregated", "spam_filtered", "dropped", "failed"):
    EVENTS.labels(_result)
POD_CONDITION_PATCHES = Counter(
    "kubesched_pod_condition_patches_total",
    "PodScheduled=False condition patches, by the result: patched, collapsed (an identical one was still "
    "queued), dropped (the recorder's queue was full), failed.",
    ["result"],
)
for _result in ("patched", "collapsed", "dropped", "failed"):
    POD_CONDITION_PATCHES.labels(_result)
POD_GROUP_STATUS_WRITES = Counter(
    "kubesched_podgroup_status_writes_total",
    "PodGroup status patches, by the result: written, failed (refused or unanswered; tried again), gone "
    "(the group or its CRD does not exist; the group is forgotten).",
    ["result"],
)
for _result in ("written", "failed", "gone"):
    POD_GROUP_STATUS_WRITES.labels(_result)
BIND_PAUSES = Counter(
    "kubesched_bind_pauses_total",
    "Times binding paused because a request got no reply from the API server (binds are held, not "
    "failed, until a probe gets an answer).",
)
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
CLIENT_QPS_LIMIT = Gauge(
    "kubesched_client_qps_limit",
    "The client-side limit on API requests per second (--kube-api-qps; 0: none) that binds, evictions, "
    "pod status patches and volume bindings share; events and PodScheduled conditions have a bucket of "
    "their own with the same limits.",
)
CLIENT_BURST_LIMIT = Gauge(
    "kubesched_client_burst_limit",
    "Requests the client-side rate limit lets through at once (--kube-api-burst).",
)
POLICY_RELOADS = Counter(
    "kubesched_policy_reloads_total",
    "SchedulerPolicy generations compiled, by the result: accepted, or invalid (the last accepted "
    "generation stays in force).",
    ["result"],
)
for _result in ("accepted", "invalid"):
    POLICY_RELOADS.labels(_result)  # exported from the start, so that the first rejection shows in rate()
POLICY_ACCEPTED = ScrapedGauge(
    "kubesched_policy_accepted",
    "Whether a SchedulerPolicy's current generation is valid (1) or was rejected (0): its Accepted "
    "condition.",
    "policy",
)
REGISTRY.register(POLICY_ACCEPTED)


def thread_cpu_seconds() -> dict[str, float]:
    """CPU seconds of the process's live threads, summed by role: the thread's name without its
    number (`algorithm_0` -> `algorithm`), and `event-loop` for the main thread, which runs it."""
    main = threading.main_thread()
    totals: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            seconds = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:  # it ended since enumerate()
            continue
        role = "event-loop" if thread is main else _NUMBERED.sub("", thread.name) or thread.name
        totals[role] = totals.get(role, 0.0) + seconds
    return totals


_NUMBERED = re.compile(r"[-_]\d+$")
THREAD_CPU = ScrapedGauge(
    "kubesched_thread_cpu_seconds",
    "CPU time used so far by the process's live threads, by role: event-loop (the scheduling loop), "
    "algorithm, event-recorder, leader-election, ... A thread that has ended is no longer counted.",
    "thread",
)
THREAD_CPU.track(thread_cpu_seconds)
REGISTRY.register(THREAD_CPU)
EVENT_HANDOFF = ScrapedGauge(
    "kubesched_event_handoff_seconds",
    "Time the scheduling loop has spent handing events and PodScheduled conditions to the recorder's "
    "thread, by scheduler name: the recorder's whole cost on the loop.",
    "scheduler",
)
REGISTRY.register(EVENT_HANDOFF)


class GaugeSet(Collector):
    """A gauge family whose series are set all at once (`show`): those not named again are gone, so
    that the series of a deleted ElasticQuota (or of a term that ended) do not stay frozen."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = list(labels)
        self._values: Mapping[tuple[str, ...], float] = {}

    def show(self, values: Mapping[tuple[str, ...], float]) -> None:
        self._values = dict(values)  # replaced whole: a scrape sees the old set or the new one

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labels)
        for labels, value in self._values.items():
            family.add_metric(list(labels), value)
        yield family


_QUOTA_UNITS = "cpu in cores, memory and storage in bytes, other resources in their own units"
# `quota_namespace`, not `namespace`: a scrape gives `namespace` the scraped pod's (kubesched's).
_QUOTA_LABELS = ("quota_namespace", "resource")
QUOTA_USED = GaugeSet(
    "kubesched_quota_used",
    "What the placed (bound or assumed), unfinished pods of a namespace with an ElasticQuota in force "
    f"request, by resource ({_QUOTA_UNITS}): the quota's status.used. Leader only.",
    _QUOTA_LABELS,
)
QUOTA_MIN = GaugeSet(
    "kubesched_quota_min",
    f"An ElasticQuota's spec.min by resource ({_QUOTA_UNITS}); 0 for one it does not name. Leader only.",
    _QUOTA_LABELS,
)
QUOTA_MAX = GaugeSet(
    "kubesched_quota_max",
    f"An ElasticQuota's spec.max by resource ({_QUOTA_UNITS}); absent for one it does not name "
    "(unlimited). Leader only.",
    _QUOTA_LABELS,
)
QUOTA_WAITING = GaugeSet(
    "kubesched_quota_waiting_pods",
    "Pending pods whose last scheduling attempt their namespace's ElasticQuota refused, by the rule: "
    "max (the quota would pass its max), mins (all quotas' use would pass the sum of their mins). "
    "Leader only.",
    ("quota_namespace", "rule"),
)
for _quota_gauge in (QUOTA_USED, QUOTA_MIN, QUOTA_MAX, QUOTA_WAITING):
    REGISTRY.register(_quota_gauge)
QUOTA_RECLAIM_EVICTIONS = Counter(
    "kubesched_quota_reclaim_evictions_total",
    "Pods deleted by preemption under ElasticQuota rules, by rule: reclaim (a pod of another quota over "
    "its min, evicted for a pod within its own min), own_quota (a lower-priority pod of the preemptor's "
    "own quota, which borrows beyond its min).",
    ["rule"],
)
for _rule in ("reclaim", "own_quota"):
    QUOTA_RECLAIM_EVICTIONS.labels(_rule)
