"""The scheduler carrying out preemption: nomination, victims deleted with a Preempted event, the
nominated node's room kept, waiting while victims terminate, binding once they are gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import pytest_asyncio
from prometheus_client import REGISTRY

from kubesched.kube.binding import Binder, BindOutcome
from kubesched.kube.events import Recorder
from kubesched.kube.eviction import Evictor
from kubesched.model.objects import Pod
from kubesched.policy.compile import default_algorithm
from kubesched.runtime.queue import QueueSettings, SchedulingQueue
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched_dev.fixtures import make_node, make_pod, wait_for

NAME = "ks"


class FakeRecorder:
    def __init__(self) -> None:
        self.failures: list[tuple[str, str]] = []

    def unschedulable(self, pod: Pod, message: str) -> None:
        self.failures.append((pod.name, message))

    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        pass


class FakeEvictor:
    def __init__(self) -> None:
        self.evicted: list[tuple[str, str, str]] = []
        self.rules: dict[str, tuple[str, str]] = {}  # victim -> (quota rule, why)
        self.nominations: list[tuple[str, str]] = []

    def evict(self, victim: Pod, preemptor: Pod, node_name: str, rule: str = "", why: str = "") -> None:
        self.evicted.append((victim.name, preemptor.name, node_name))
        self.rules[victim.name] = (rule, why)

    def nominate(self, pod: Pod, node_name: str) -> None:
        self.nominations.append((pod.name, node_name))


class FakeBinder:
    def __init__(self) -> None:
        self.bound: list[tuple[str, str]] = []

    async def bind(
        self, pod: Pod, node_name: str, extender: Any = None, **_: object
    ) -> tuple[BindOutcome, str, float]:
        self.bound.append((pod.name, node_name))
        return BindOutcome.BOUND, "", 0.0


class Harness:
    def __init__(self) -> None:
        self.recorder = FakeRecorder()
        self.evictor = FakeEvictor()
        self.binder = FakeBinder()
        self.scheduler = Scheduler(
            SchedulerSettings(NAME, seed=1),
            default_algorithm(),
            cast(Binder, self.binder),
            cast(Recorder, self.recorder),
            queue=SchedulingQueue(QueueSettings(0.01, 0.02, 60.0)),
            evictor=cast(Evictor, self.evictor),
        )

    def failures_of(self, name: str) -> list[str]:
        return [message for pod, message in self.recorder.failures if pod == name]


@pytest_asyncio.fixture
async def harness() -> AsyncIterator[Harness]:
    h = Harness()
    loop = asyncio.create_task(h.scheduler.run())
    yield h
    h.scheduler.queue.close()
    await asyncio.wait_for(loop, 5)


def bound(name: str, priority: int, cpu: str = "2", node: str = "n1", **kwargs: Any) -> dict[str, Any]:
    return make_pod(name, NAME, "other", cpu=cpu, priority=priority, node_name=node, **kwargs)


async def test_preemptor_nominates_evicts_waits_and_binds_once_victims_are_gone(harness: Harness) -> None:
    s = harness.scheduler
    s.on_node("ADDED", make_node("n1", cpu="4"))
    s.on_node("ADDED", make_node("n2", cpu="4"))
    s.on_pod("ADDED", bound("cheap", 1, cpu="4", node="n1"))
    s.on_pod("ADDED", bound("dear", 50, cpu="4", node="n2"))
    high = make_pod("high", NAME, NAME, cpu="3", priority=100)
    s.on_pod("ADDED", high)

    await wait_for(lambda: harness.evictor.evicted, timeout=5)
    assert harness.evictor.evicted == [("cheap", "high", "n1")]
    assert harness.evictor.rules["cheap"] == ("", "")  # no quota: kube-scheduler's preemption
    assert ("high", "n1") in harness.evictor.nominations
    assert harness.failures_of("high")[0] == "0/2 nodes are available: 2 Insufficient cpu."
    uid = high["metadata"]["uid"]
    assert s.nominator.node_of(uid) == "n1"

    # The nomination comes back from the API server; the victim is terminating.
    s.on_pod("MODIFIED", {**high, "status": {"nominatedNodeName": "n1"}})
    terminating = bound("cheap", 1, cpu="4", node="n1")
    terminating["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    s.on_pod("MODIFIED", terminating)

    # A medium pod that would fit n1 once "cheap" goes, but not beside high: the room is high's.
    s.on_pod("ADDED", make_pod("medium", NAME, NAME, cpu="2", priority=50))
    await wait_for(lambda: harness.failures_of("medium"), timeout=5)
    await wait_for(lambda: len(harness.failures_of("high")) >= 2, timeout=5)
    assert harness.failures_of("high")[-1].endswith(
        "preemption: not eligible due to a terminating pod on the nominated node."
    )
    assert harness.evictor.evicted == [("cheap", "high", "n1")]  # no second preemption

    s.on_pod("DELETED", terminating)
    await wait_for(lambda: ("high", "n1") in harness.binder.bound, timeout=5)
    assert uid not in s.nominator
    await wait_for(lambda: len(harness.failures_of("medium")) >= 2, timeout=5)
    assert [name for name, _ in harness.binder.bound] == ["high"]


async def test_preemption_policy_never_leaves_every_pod_in_place(harness: Harness) -> None:
    s = harness.scheduler
    s.on_node("ADDED", make_node("n1", cpu="2"))
    s.on_pod("ADDED", bound("low", 0))
    never = make_pod("never", NAME, NAME, cpu="2", priority=100)
    never["spec"]["preemptionPolicy"] = "Never"
    s.on_pod("ADDED", never)
    await wait_for(lambda: harness.failures_of("never"), timeout=5)
    assert harness.failures_of("never")[0] == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    )
    assert harness.evictor.evicted == [] and len(s.nominator) == 0


async def test_a_nomination_is_dropped_when_the_pod_is_deleted_or_bound_elsewhere(harness: Harness) -> None:
    s = harness.scheduler
    s.on_node("ADDED", make_node("n1", cpu="2"))
    s.on_pod("ADDED", bound("low", 0))
    a = make_pod("a", NAME, NAME, cpu="2", priority=10)
    b = make_pod("b", NAME, NAME, cpu="2", priority=10)
    s.on_pod("ADDED", {**a, "status": {"nominatedNodeName": "n1"}})  # nominated by an earlier leader
    s.on_pod("ADDED", {**b, "status": {"nominatedNodeName": "n1"}})
    assert len(s.nominator) == 2
    s.on_pod("DELETED", a)
    s.on_pod("MODIFIED", {**b, "spec": {**b["spec"], "nodeName": "n9"}})
    assert len(s.nominator) == 0


def _quota(namespace: str, gpus_min: int, gpus_max: int) -> dict[str, Any]:
    meta = {
        "namespace": namespace,
        "name": "eq",
        "uid": f"eq-{namespace}",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    return {"metadata": meta, "spec": {"min": {GPU: str(gpus_min)}, "max": {GPU: str(gpus_max)}}}


GPU = "example.com/gpu"


async def test_a_victim_of_quota_reclaim_is_told_the_rule_it_was_chosen_by(harness: Harness) -> None:
    s = harness.scheduler
    s.on_node("ADDED", make_node("n1", cpu="64", extended={GPU: "4"}))
    s.on_object("ElasticQuota", "ADDED", _quota("lender", 2, 4))
    s.on_object("ElasticQuota", "ADDED", _quota("owner", 4, 4))
    # lender borrows all four GPUs, at a higher priority than the owner's pod.
    for i in range(2):
        s.on_pod(
            "ADDED", make_pod(f"l{i}", "lender", "other", priority=100, node_name="n1", extended={GPU: "2"})
        )
    s.on_pod("ADDED", make_pod("mine", "owner", NAME, priority=0, extended={GPU: "2"}))
    await wait_for(lambda: harness.evictor.evicted, timeout=5)
    [(victim, preemptor, node)] = harness.evictor.evicted
    assert (preemptor, node) == ("mine", "n1")
    assert harness.evictor.rules[victim] == (
        "reclaim",
        "ElasticQuota lender/eq over its min, reclaimed by owner/eq within its min",
    )


class FakeStatuses:
    def __init__(self) -> None:
        self.statuses: dict[str, Mapping[str, Any]] = {}

    def set(self, key: str, status: Mapping[str, Any]) -> None:
        self.statuses[key] = status

    def forget(self, key: str) -> None:
        self.statuses.pop(key, None)

    @property
    def pending(self) -> list[str]:
        return []


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def test_quota_gauges_follow_the_cache_and_go_with_their_quota_and_the_term() -> None:
    statuses = FakeStatuses()
    s = Scheduler(
        SchedulerSettings(NAME, seed=1),
        default_algorithm(),
        cast(Binder, FakeBinder()),
        cast(Recorder, FakeRecorder()),
        queue=SchedulingQueue(QueueSettings(0.01, 0.02, 60.0)),
        quota_writer=statuses,
    )
    s.on_node("ADDED", make_node("n1", cpu="64", extended={GPU: "4"}))
    quota = _quota("team", 2, 4)
    quota["spec"]["min"]["cpu"] = "1500m"
    s.on_object("ElasticQuota", "ADDED", quota)
    s.on_pod("ADDED", make_pod("used", "team", "other", cpu="500m", node_name="n1", extended={GPU: "4"}))
    s.on_pod("ADDED", make_pod("waits", "team", NAME, extended={GPU: "1"}))
    loop = asyncio.create_task(s.run())
    await wait_for(
        lambda: sample("kubesched_quota_waiting_pods", quota_namespace="team", rule="max") == 1, timeout=5
    )
    assert sample("kubesched_quota_waiting_pods", quota_namespace="team", rule="mins") == 0
    assert sample("kubesched_quota_used", quota_namespace="team", resource=GPU) == 4
    assert sample("kubesched_quota_used", quota_namespace="team", resource="cpu") == 0.5
    assert sample("kubesched_quota_min", quota_namespace="team", resource="cpu") == 1.5
    assert sample("kubesched_quota_max", quota_namespace="team", resource=GPU) == 4
    assert sample("kubesched_quota_max", quota_namespace="team", resource="cpu") is None  # unlimited
    s.on_object("ElasticQuota", "DELETED", quota)
    await wait_for(
        lambda: sample("kubesched_quota_used", quota_namespace="team", resource=GPU) is None, timeout=5
    )
    assert sample("kubesched_quota_waiting_pods", quota_namespace="team", rule="max") is None
    s.on_object("ElasticQuota", "ADDED", quota)
    await wait_for(
        lambda: sample("kubesched_quota_min", quota_namespace="team", resource=GPU) == 2, timeout=5
    )
    s.queue.close()
    await asyncio.wait_for(loop, 5)
    # The term is over: a follower shows none.
    await wait_for(
        lambda: sample("kubesched_quota_min", quota_namespace="team", resource=GPU) is None, timeout=5
    )
