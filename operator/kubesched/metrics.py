"""Prometheus metrics, named after kube-scheduler's."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
PENDING_PODS = Gauge("scheduler_pending_pods", "Number of pending pods, by the queue type.", ["queue"])
BINDS = Counter("kubesched_binds_total", "Binding requests by outcome.", ["outcome"])
LEADER_STATUS = Gauge(
    "leader_election_master_status",
    "Whether this process is the leader of the lease `name` (1) or a follower (0).",
    ["name"],
)
