"""A preemption under way is not planned again around its own victims: a gang whose member's
nominated node still has a lower-priority pod terminating evicts nobody else (kube-scheduler 1.20's
PodEligibleToPreemptOthers, pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go),
and the nomination that makes the preemptor try again is written only after the victims' deletions
(PrepareCandidate deletes them before the scheduler records the nomination)."""

from __future__ import annotations

import asyncio
import random
from typing import Any, cast

import pytest

from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.generic import Algorithm, ScheduleResult
from kubesched.algorithm.preemption import MSG_TERMINATING, PreemptionOutcome
from kubesched.kube import eviction
from kubesched.kube.client import TokenBucket
from kubesched.kube.events import Recorder
from kubesched.kube.eviction import Evictor
from kubesched.model.nodeinfo import ClusterObjects, Snapshot
from kubesched.model.objects import Pod, node_from_dict, pod_from_dict
from kubesched.model.podgroup import POD_GROUP_LABEL
from kubesched.policy.compile import default_algorithm
from kubesched_dev.fixtures import make_node, make_pod, node_info

PROFILES: dict[str, Algorithm] = {"kubesched": default_algorithm()}
GROUP = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"namespace": "ns", "name": "g", "uid": "uid-g"},
    "spec": {"minMember": 2},
}


def low(name: str, node: str, *, terminating: bool = False) -> Pod:
    raw = make_pod(name, "ns", "default-scheduler", cpu="2", priority=1, node_name=node)
    raw["status"]["phase"] = "Running"
    if terminating:
        raw["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return pod_from_dict(raw)


def member(name: str) -> Pod:
    return pod_from_dict(make_pod(name, "ns", cpu="2", priority=100, labels={POD_GROUP_LABEL: "g"}))


def cluster(*lows: Pod) -> Snapshot:
    """Two 4-cpu nodes running `lows`."""
    infos = [
        node_info(node_from_dict(make_node(name, cpu="4")), [p for p in lows if p.node_name == name])
        for name in ("n1", "n2")
    ]
    return Snapshot.of(infos, ClusterObjects(pod_groups={"ns/g": GROUP}))


def test_a_gang_whose_earlier_victim_still_terminates_evicts_nobody_and_keeps_its_nodes() -> None:
    """The members' earlier plan evicted low-a0 (still terminating) and low-b0: planning again, with
    ties broken at random, would evict others; the group keeps its nominations and waits."""
    snap = cluster(
        low("low-a0", "n1", terminating=True), low("low-a1", "n1"), low("b0", "n2"), low("b1", "n2")
    )
    gang = [member("m0"), member("m1")]
    nominated = {gang[0].uid: (gang[0], "n1"), gang[1].uid: (gang[1], "n2")}
    for seed in range(8):
        outcomes, _ = schedule_batch(PROFILES, gang, snap, random.Random(seed), 0, nominated=nominated)
        for pod, outcome in zip(gang, outcomes, strict=True):
            assert isinstance(outcome, PreemptionOutcome), outcome
            assert outcome.preemption.victims == (), (seed, pod.name, outcome.preemption)
            assert outcome.preemption.node_name == nominated[pod.uid][1]
            assert outcome.summary() == (
                "pod group ns/g: only 0 of 2 members can be placed: 0/2 nodes are available: "
                f"2 Insufficient cpu. preemption: {MSG_TERMINATING}"
            )


def test_with_no_victim_terminating_the_gang_plans_its_preemption() -> None:
    """The same cluster once nothing terminates: the group evicts two pods, one per member."""
    snap = cluster(low("low-a0", "n1"), low("low-a1", "n1"), low("b0", "n2"), low("b1", "n2"))
    gang = [member("m0"), member("m1")]
    nominated = {gang[0].uid: (gang[0], "n1"), gang[1].uid: (gang[1], "n2")}
    outcomes, _ = schedule_batch(PROFILES, gang, snap, random.Random(0), 0, nominated=nominated)
    victims = [v.name for o in outcomes if isinstance(o, PreemptionOutcome) for v in o.preemption.victims]
    assert len(victims) == 2, outcomes


def test_once_the_victims_are_gone_the_gang_is_placed() -> None:
    snap = cluster(low("low-a1", "n1"), low("b1", "n2"))
    gang = [member("m0"), member("m1")]
    nominated = {gang[0].uid: (gang[0], "n1"), gang[1].uid: (gang[1], "n2")}
    outcomes, _ = schedule_batch(PROFILES, gang, snap, random.Random(0), 0, nominated=nominated)
    assert all(isinstance(o, ScheduleResult) for o in outcomes), outcomes


class _Recorder:
    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        pass


async def test_a_nomination_is_written_after_the_evictions_decided_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Decisions applied in one go: a member held for its group (nominated first, no victims of its
    own) and a member with a victim. Neither nomination leaves before the deletion is answered."""
    sent: list[str] = []
    deleted = asyncio.Event()

    async def request(api: Any, method: str, path: str, body: Any = None, **_: Any) -> tuple[int, Any]:
        sent.append(
            f"{method} {path.rsplit('/', 2)[-2] if path.endswith('/status') else path.rsplit('/', 1)[-1]}"
        )
        if method == "DELETE":
            await deleted.wait()
        return 200, {}

    monkeypatch.setattr(eviction, "request", request)
    evictor = Evictor(cast(Any, None), TokenBucket(0, 0), cast(Recorder, _Recorder()))
    held, preemptor, victim = member("m0"), member("m1"), low("low-a0", "n1")
    evictor.nominate(held, "n2")
    evictor.evict(victim, preemptor, "n1")
    evictor.nominate(preemptor, "n1")
    for _ in range(20):
        await asyncio.sleep(0)
    assert sent == ["PATCH low-a0", "DELETE low-a0"]  # its DisruptionTarget mark, then the deletion
    deleted.set()
    await evictor.close()
    assert sent[:2] == ["PATCH low-a0", "DELETE low-a0"] and sorted(sent[2:]) == ["PATCH m0", "PATCH m1"]


async def test_clearing_a_nomination_waits_for_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    deleted = asyncio.Event()

    async def request(api: Any, method: str, path: str, body: Any = None, **_: Any) -> tuple[int, Any]:
        sent.append(method)
        if method == "DELETE":
            await deleted.wait()
        return 200, {}

    monkeypatch.setattr(eviction, "request", request)
    evictor = Evictor(cast(Any, None), TokenBucket(0, 0), cast(Recorder, _Recorder()))
    evictor.evict(low("low-a0", "n1"), member("m1"), "n1")
    evictor.nominate(member("m0"), "")
    for _ in range(20):
        await asyncio.sleep(0)
    assert sorted(sent) == ["DELETE", "PATCH", "PATCH"]  # the victim's mark, and the cleared nomination
    deleted.set()
    await evictor.close()
