"""Fair share among borrowing ElasticQuotas (SchedulerPolicy quotas.fairShare): the queue's order
(runtime/queue.py), the share it ranks by (model/quota.py), the policy field, and the loop."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Mapping
from typing import Any, cast

import pytest

from kubesched.kube.binding import Binder, BindOutcome
from kubesched.kube.events import Recorder
from kubesched.model.objects import Pod, pod_from_dict
from kubesched.model.quota import QuotaState, elastic_quota_from_dict, request
from kubesched.policy.compile import PolicyError, compile_policy, default_algorithm
from kubesched.runtime.queue import QueueSettings, SchedulingQueue
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched_dev.fixtures import make_node, make_pod, wait_for


def eq(namespace: str, min: Mapping[str, Any], max: Mapping[str, Any] | None = None) -> dict[str, Any]:
    meta = {"namespace": namespace, "name": f"eq-{namespace}", "uid": f"uid-eq-{namespace}"}
    spec = {"min": dict(min), **({"max": dict(max)} if max is not None else {})}
    return {"metadata": {**meta, "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec}


def quotas(**mins: int) -> QuotaState:
    """Quotas with a cpu min of `mins[ns]` cores each, nothing used."""
    return QuotaState.build([elastic_quota_from_dict(eq(ns, {"cpu": n})) for ns, n in mins.items()], [])


def raw_pod(name: str, namespace: str, minute: int, priority: int = 0) -> dict[str, Any]:
    raw = make_pod(name, namespace, cpu="1", priority=priority)
    raw["metadata"]["creationTimestamp"] = f"2026-01-01T00:{minute:02d}:00Z"
    return raw


def pod(name: str, namespace: str, minute: int, priority: int = 0) -> Pod:
    return pod_from_dict(raw_pod(name, namespace, minute, priority))


class Cluster:
    """The quota state a queue reads, binds added to it as the loop would assume them."""

    def __init__(self, state: QuotaState) -> None:
        self.state = state

    def bind(self, placed: Pod) -> None:
        self.state = self.state.with_pod(placed)


def fair_queue(cluster: Cluster, fair: bool = True) -> SchedulingQueue:
    queue = SchedulingQueue(QueueSettings())
    queue.set_fair_share((lambda: cluster.state) if fair else None, lambda pod: True)
    return queue


async def bound_split(fair: bool, batch: int, capacity: int = 16) -> Counter[str]:
    """A (min 2) and B (min 6), all A's pods older: which namespaces get `capacity` one-cpu slots."""
    cluster = Cluster(quotas(a=2, b=6))
    queue = fair_queue(cluster, fair)
    for i in range(30):
        queue.add(pod(f"a{i}", "a", minute=i))
    for i in range(30):
        queue.add(pod(f"b{i}", "b", minute=30 + i))
    placed: Counter[str] = Counter()
    while sum(placed.values()) < capacity:
        for entry in await queue.pop_batch(min(batch, capacity - sum(placed.values()))):
            cluster.bind(entry.pod)
            placed[entry.pod.namespace] += 1
            queue.done(entry)
    return placed


@pytest.mark.parametrize("batch", [1, 5, 16])
async def test_borrowers_split_idle_capacity_in_proportion_to_their_mins(batch: int) -> None:
    # The pods taken into a batch count at once: a whole batch splits as pod-by-pod pops do.
    assert await bound_split(fair=True, batch=batch) == {"a": 4, "b": 12}


async def test_without_fair_share_the_queue_order_decides() -> None:
    assert await bound_split(fair=False, batch=5) == {"a": 16}


async def test_within_their_mins_pods_keep_upstreams_order_and_go_before_borrowers() -> None:
    cluster = Cluster(quotas(a=1, b=4))
    cluster.bind(pod("a-running", "a", 0))  # a is at its min: its next pod borrows
    queue = fair_queue(cluster)
    queue.add(pod("a1", "a", minute=1))
    queue.add(pod("free", "no-quota", minute=3))
    queue.add(pod("b1", "b", minute=2))
    queue.add(pod("a-urgent", "a", minute=4, priority=10))
    names = [e.pod.name for e in await queue.pop_batch(10)]
    # Priority first; then b (under its min) and the quota-less pod by age; then the borrower.
    assert names == ["a-urgent", "b1", "free", "a1"]


async def test_pods_of_profiles_without_fair_share_keep_their_place() -> None:
    cluster = Cluster(quotas(a=1, b=4))
    cluster.bind(pod("a-running", "a", 0))
    queue = SchedulingQueue(QueueSettings())
    queue.set_fair_share(lambda: cluster.state, lambda pod: pod.namespace != "a")
    queue.add(pod("a1", "a", minute=1))
    queue.add(pod("b1", "b", minute=2))
    assert [e.pod.name for e in await queue.pop_batch(10)] == ["a1", "b1"]


async def test_turning_fair_share_on_and_off_keeps_every_waiting_pod_in_line() -> None:
    cluster = Cluster(quotas(a=1, b=1))
    cluster.bind(pod("a-running", "a", 0))
    queue = fair_queue(cluster, fair=False)
    for i, ns in enumerate("abab"):
        queue.add(pod(f"{ns}{i}", ns, minute=1 + i))
    queue.delete(pod("b3", "b", 4).uid)  # its heap entry stays behind, to be skipped
    queue.set_fair_share(lambda: cluster.state, lambda pod: True)
    assert [e.pod.name for e in await queue.pop_batch(1)] == ["b1"]  # a borrows: b first
    queue.set_fair_share(None, lambda pod: True)
    assert [e.pod.name for e in await queue.pop_batch(10)] == ["a0", "a2"]


@pytest.mark.parametrize(
    ("mins", "used", "share"),
    [
        ({"cpu": "2"}, {}, 0.0),
        ({"cpu": "2"}, {"cpu": "1"}, 0.5),
        ({"cpu": "2", "memory": "4Gi"}, {"cpu": "1", "memory": "6Gi"}, 1.5),  # the dominant resource
        ({"cpu": "2"}, {"cpu": "1", "memory": "1Gi"}, math.inf),  # used, no min: all borrowed
        ({}, {}, 0.0),
    ],
)
def test_the_dominant_share_is_the_largest_used_over_min(
    mins: Mapping[str, str], used: Mapping[str, str], share: float
) -> None:
    state = QuotaState.build([elastic_quota_from_dict(eq("a", mins))], [])
    running = make_pod("r", "a", cpu=used.get("cpu"), memory=used.get("memory"), node_name="n1")
    state = state.with_pod(pod_from_dict(running)) if used else state
    assert state.share("a") == share
    assert state.share("no-quota") == 0.0


def test_the_policy_sets_fair_share_and_refuses_a_non_boolean() -> None:
    assert default_algorithm().quota_fair_share is False
    algorithm = compile_policy({"quotas": {"fairShare": True}})
    assert algorithm.quota_fair_share is True
    assert algorithm.quota_borrowing == "Guarantees"
    assert algorithm.describe()["quotas"] == {"fairShare": True}
    with pytest.raises(PolicyError) as caught:
        compile_policy({"quotas": {"fairShare": "yes"}})
    assert caught.value.field == "quotas.fairShare"


class RecordingBinder:
    def __init__(self) -> None:
        self.bound: list[Pod] = []

    async def bind(self, pod: Pod, node_name: str, extender: Any = None, **_: object) -> Any:
        self.bound.append(pod)
        return BindOutcome.BOUND, "", 0.0


class SilentRecorder:
    def unschedulable(self, pod: Pod, message: str) -> None:
        pass

    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        pass


async def loop_split(policy: Mapping[str, Any]) -> Counter[str]:
    """Through the scheduling loop: 16 free cores, A (min 2) and B (min 6) borrowing under `policy`."""
    binder = RecordingBinder()
    scheduler = Scheduler(
        SchedulerSettings("kubesched", seed=1, batch_size=8),
        compile_policy(policy),
        cast(Binder, binder),
        cast(Recorder, SilentRecorder()),
        queue=SchedulingQueue(QueueSettings(0.01, 0.02, 60.0)),
    )
    for i in range(4):
        scheduler.on_node("ADDED", make_node(f"n{i}", cpu="4"))
    for ns, low in (("a", 2), ("b", 6)):
        scheduler.on_object("ElasticQuota", "ADDED", eq(ns, {"cpu": low}, {"cpu": 100}))
    for i in range(30):
        scheduler.on_pod("ADDED", raw_pod(f"a{i}", "a", minute=i))
    for i in range(30):
        scheduler.on_pod("ADDED", raw_pod(f"b{i}", "b", minute=30 + i))
    loop = asyncio.create_task(scheduler.run())
    try:
        await wait_for(lambda: len(binder.bound) == 16 and not scheduler.queue.counts()["active"], timeout=10)
    finally:
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
    assert sum(request(p).get("cpu", 0) for p in binder.bound) == 16_000
    return Counter(p.namespace for p in binder.bound)


async def test_the_loop_splits_borrowed_capacity_by_the_mins_with_fair_share() -> None:
    fair = await loop_split({"quotas": {"borrowing": "Cluster", "fairShare": True}})
    assert fair == {"a": 4, "b": 12}
    assert await loop_split({"quotas": {"borrowing": "Cluster"}}) == {"a": 16}
