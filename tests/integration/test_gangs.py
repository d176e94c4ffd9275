"""Gang scheduling (PodGroups) on a real API server, with `kubesched run` as a process: all or
nothing under contention, members that come late, input the scheduler must refuse, members beyond
minMember, scheduleTimeoutSeconds, and preemption by a gang.

The semantics are those of kubernetes-sigs/scheduler-plugins' coscheduling
(pkg/coscheduling/coscheduling.go: PreFilter's checks, Permit's minMember barrier;
pkg/controllers/podgroup_controller.go: the phases), as kubesched implements them
(kubesched/algorithm/gang.py, kubesched/runtime/gangs.py). Run with -s to read the figures printed.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from kubesched.algorithm.preemption import MSG_TERMINATING
from kubesched.kube.client import MERGE_PATCH, request
from kubesched.model.objects import pod_from_dict
from kubesched.model.podgroup import LEGACY_POD_GROUP_LABEL, POD_GROUP_LABEL
from kubesched_dev import fixtures as testing
from kubesched_dev.fixtures import (
    create_nodes,
    create_pods,
    make_node,
    make_pod,
    priority_class_name,
    sum_resources,
    wait_for,
)

from .kubeapi import events_for, pods_by_name
from .kubesched_process import KubeschedProcess
from .podgroups import (
    Pods,
    bound,
    create_object,
    delete_namespace,
    describe,
    failed_scheduling,
    group_condition,
    member,
    node_of,
    pod_group,
    unschedulable_message,
    wait_group,
    wait_pods,
)
from .test_policies import Policies

REPETITIONS = 5
PRIORITIES = (1, 100, 1000)  # victims, gangs, pods no gang may evict
LEAST = [{"name": "LeastRequestedPriority", "weight": 1}]


@pytest.fixture(scope="module")
def kubesched(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeschedProcess]:
    """One scheduler for the module (each test has its own namespace and nodes), leading once ready."""
    name = f"ks-gangs-{uuid.uuid4().hex[:8]}"
    proc = KubeschedProcess(control_plane.kubeconfig, name, tmp_path_factory.mktemp("gangs"))
    with proc:
        proc.wait_for_log("cache_synced")
        proc.wait_for_log("leader_elected")
        yield proc


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def _priority_classes_removed(api: ApiClient) -> AsyncIterator[None]:
    """create_pods makes the PriorityClasses the pods name; they are cluster-scoped."""
    yield
    for priority in PRIORITIES:
        await request(
            api, "DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{priority_class_name(priority)}"
        )


@pytest_asyncio.fixture(autouse=True)
async def _pod_groups_deleted(
    api: ApiClient, namespace: str, _priority_classes_removed: None
) -> AsyncIterator[None]:
    """The namespace fixture deletes pods only: the PodGroups go too, or the scheduler keeps them."""
    yield
    await delete_namespace(api, namespace)


# --- all or nothing --------------------------------------------------------------------------------


async def test_of_two_groups_that_fit_only_one_at_a_time_one_is_bound_whole_and_the_other_not_at_all(
    api: ApiClient, kubesched: KubeschedProcess
) -> None:
    """Two groups of three 2-cpu members on two 4-cpu nodes: either fits alone, not both. The groups
    and their members are created in a random interleaved order (seeded per repetition): whichever
    the scheduler completes first is bound whole, the other not at all, and its PodGroup says why.
    (coscheduling's Permit barrier can leave two groups holding part of the room each until one
    times out; here a group is placed whole or not at all, in one decision.)"""
    winners = []
    for repetition in range(REPETITIONS):
        namespace = f"gangs-{uuid.uuid4().hex[:8]}-{repetition}"
        await testing.create_namespace(api, namespace)
        try:
            winners.append(
                await _contend(api, kubesched.scheduler_name, namespace, random.Random(repetition))
            )
        finally:
            await delete_namespace(api, namespace)
    print(f"\ngroup bound whole in each repetition: {winners}")


async def _contend(api: ApiClient, scheduler: str, namespace: str, rng: random.Random) -> str:
    selector = {"gang-contention": namespace}  # this repetition's nodes only
    await create_nodes(api, [make_node(f"{namespace}-{x}", cpu="4", labels=selector) for x in "ab"])
    groups = {g: [f"{g}-{i}" for i in range(3)] for g in ("red", "blue")}
    objects = [pod_group(g, namespace, 3) for g in groups]
    objects += [
        member(name, namespace, g, scheduler, cpu="2", node_selector=selector)
        for g, names in groups.items()
        for name in names
    ]
    rng.shuffle(objects)
    order = [obj["metadata"]["name"] for obj in objects]
    for manifest in objects:
        await create_object(api, manifest)

    def whole(pods: Pods) -> list[str]:
        return [g for g, names in groups.items() if len(bound(pods, names)) == len(names)]

    def decided(pods: Pods) -> bool:
        # One group bound whole, and the scheduler has since found the other short of room.
        if len(whole(pods)) != 1 or not all(n in pods for names in groups.values() for n in names):
            return False
        (loser,) = groups.keys() - set(whole(pods))
        short = f"pod group {namespace}/{loser}: only "
        return all(short in unschedulable_message(pods[name]) for name in groups[loser])

    pods = await wait_pods(api, namespace, decided, f"one group bound whole, the other short (order {order})")
    (winner,) = whole(pods)
    (loser,) = groups.keys() - {winner}
    assert bound(pods, groups[loser]) == [], f"order {order}:\n{describe(pods)}"
    assert any("pod group" in m for m in await failed_scheduling(api, namespace, groups[loser][0]))

    group = await wait_group(api, namespace, loser, _reports("Pending", "only "), "loser Pending")
    status = group["status"]
    condition = group_condition({"status": status})
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable"), status
    assert condition["message"].startswith(
        f"pod group {namespace}/{loser}: only 1 of 3 members can be placed"
    )
    assert status["scheduled"] == 0
    won = (await wait_group(api, namespace, winner, _placed(3), f"{winner} placed"))["status"]
    assert won["phase"] == "Scheduling" and group_condition({"status": won})["reason"] == "Placed", won
    # Still nothing of the loser bound once both statuses are written.
    pods = await pods_by_name(api, namespace)
    assert bound(pods, groups[loser]) == [], describe(pods)
    return winner


# --- members that come late --------------------------------------------------------------------


async def test_a_group_waits_for_its_last_member_and_is_bound_whole_soon_after_it_comes(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    """minMember 4 and three members: none is placed, each says how many exist (coscheduling's
    PreFilter: "less than minMember"); the fourth completes the group and all four are bound."""
    await create_nodes(api, [make_node("late-a", cpu="8")])
    scheduler = kubesched.scheduler_name
    await create_object(api, pod_group("late", namespace, 4))
    names = [f"late-{i}" for i in range(4)]
    await create_pods(api, [member(n, namespace, "late", scheduler) for n in names[:3]])
    waiting = f"pod group {namespace}/late: 3 of 4 members exist."

    def told(pods: Pods) -> bool:
        return all(n in pods and unschedulable_message(pods[n]) == waiting for n in names[:3])

    pods = await wait_pods(api, namespace, told, "three members told that 3 of 4 exist")
    assert bound(pods, names[:3]) == [], describe(pods)

    async def event_says_so() -> list[str]:
        return [m for m in await failed_scheduling(api, namespace, "late-2") if m == waiting]

    await wait_for(event_says_so, timeout=15, message="a FailedScheduling event saying 3 of 4 exist")
    group = await wait_group(api, namespace, "late", _reports("Pending", "3 of 4"), "late waiting")
    status = group["status"]
    condition = group_condition({"status": status})
    assert condition == {**condition, "status": "False", "reason": "WaitingForMembers"}, status
    assert condition["message"] == "3 of 4 members exist"

    began = time.monotonic()
    await create_pods(api, [member(names[3], namespace, "late", scheduler)])
    pods = await wait_pods(
        api, namespace, lambda pods: len(bound(pods, names)) == 4, "all four bound", timeout=20, interval=0.05
    )
    took = time.monotonic() - began
    print(f"\nthe fourth member created -> the last of the group bound: {took:.2f} s")
    assert took < 20
    status = (await wait_group(api, namespace, "late", _placed(4), "late placed"))["status"]
    assert status["phase"] == "Scheduling", status


# --- input the scheduler must refuse -------------------------------------------------------------


async def test_a_member_of_a_pod_group_that_does_not_exist_waits_for_it(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    """coscheduling's PreFilter rejects a pod whose PodGroup is not found; it is tried again when
    the PodGroup appears."""
    await create_nodes(api, [make_node("orphan-a", cpu="4")])
    await create_pods(api, [member("orphan", namespace, "missing", kubesched.scheduler_name)])
    expected = f"pod group {namespace}/missing: the PodGroup does not exist; its members wait for it."
    await wait_pods(
        api, namespace, lambda pods: unschedulable_message(pods.get("orphan", {})) == expected, "orphan told"
    )
    await create_object(api, pod_group("missing", namespace, 1))
    await wait_pods(api, namespace, lambda pods: bound(pods, ["orphan"]) == ["orphan"], "orphan bound")


async def test_min_resources_the_cluster_cannot_cover_hold_every_member(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    """coscheduling's CheckClusterResource: the cluster's free resources must cover minResources."""
    await create_nodes(api, [make_node("huge-a", cpu="4")])
    await create_object(api, pod_group("huge", namespace, 2, min_resources={"cpu": "10000"}))
    names = ["huge-0", "huge-1"]
    await create_pods(api, [member(n, namespace, "huge", kubesched.scheduler_name) for n in names])
    prefix = (
        f"pod group {namespace}/huge: the cluster's free resources cannot cover minResources "
        "(cpu 10000 needed,"
    )

    def told(pods: Pods) -> bool:
        return all(n in pods and unschedulable_message(pods[n]).startswith(prefix) for n in names)

    pods = await wait_pods(api, namespace, told, "members told minResources cannot be covered")
    assert bound(pods, names) == [], describe(pods)
    status = (await wait_group(api, namespace, "huge", _reports("Pending", "minResources"), "huge"))["status"]
    assert group_condition({"status": status})["reason"] == "Unschedulable", status


async def test_members_under_different_scheduler_names_are_never_placed(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess, policies: Policies
) -> None:
    """coscheduling serves one scheduler name per group; here both names are profiles of this
    scheduler (the second from a SchedulerPolicy), and still the group is refused."""
    scheduler = kubesched.scheduler_name
    other = f"{scheduler}-other"
    policy = f"gang-other-{namespace}"
    await policies.create(policy, {"schedulerName": other, "priorities": LEAST})
    await policies.wait_status(policy, 1, "True", "True")
    await create_nodes(api, [make_node("mixed-a", cpu="4")])
    await create_object(api, pod_group("mixed", namespace, 2))
    await create_pods(
        api, [member("mixed-0", namespace, "mixed", scheduler), member("mixed-1", namespace, "mixed", other)]
    )
    names = sorted((scheduler, other))
    expected = (
        f"pod group {namespace}/mixed: its members use different scheduler names ({', '.join(names)}), "
        "so none is placed."
    )

    def told(pods: Pods) -> bool:
        return all(unschedulable_message(pods.get(n, {})) == expected for n in ("mixed-0", "mixed-1"))

    pods = await wait_pods(api, namespace, told, "both members told of the two scheduler names")
    assert bound(pods, ["mixed-0", "mixed-1"]) == [], describe(pods)


# --- beyond minMember ------------------------------------------------------------------------------


async def test_members_beyond_min_member_are_ordinary_pods_once_the_group_is_placed(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    """coscheduling lets a member through once minMember of its group are placed; here the later
    members are placed one by one as plain pods, and one that does not fit says so as a plain pod."""
    await create_nodes(api, [make_node("more-a", cpu="4")])
    scheduler = kubesched.scheduler_name
    await create_object(api, pod_group("more", namespace, 2))
    first = ["more-0", "more-1"]
    await create_pods(api, [member(n, namespace, "more", scheduler) for n in first])
    await wait_pods(api, namespace, lambda pods: len(bound(pods, first)) == 2, "the first two bound")
    status = (await wait_group(api, namespace, "more", _placed(2), "more placed"))["status"]
    assert status["phase"] == "Scheduling", status

    later = ["more-2", "more-3", "more-4"]  # room for two of them
    await create_pods(api, [member(n, namespace, "more", scheduler) for n in later])

    def settled(pods: Pods) -> bool:
        return len(bound(pods, later)) == 2 and any(unschedulable_message(pods.get(n, {})) for n in later)

    pods = await wait_pods(api, namespace, settled, "two more bound, the last told it does not fit")
    (left,) = [n for n in later if not node_of(pods[n])]
    message = unschedulable_message(pods[left])
    assert "pod group" not in message and message.startswith(
        "0/1 nodes are available: 1 Insufficient cpu."
    ), message
    status = (await wait_group(api, namespace, "more", _placed(4), "more: 4 scheduled"))["status"]
    assert status["phase"] == "Scheduling", status


# --- scheduleTimeoutSeconds ----------------------------------------------------------------------


async def test_a_group_past_its_schedule_timeout_says_so_and_is_bound_whole_once_room_appears(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    """coscheduling's scheduleTimeoutSeconds bounds how long members wait at Permit; here the group
    keeps its place and its status says the time is up, until a node makes room for all of it."""
    await create_nodes(api, [make_node("slow-a", cpu="2")])
    scheduler = kubesched.scheduler_name
    began = time.monotonic()
    await create_object(api, pod_group("slow", namespace, 2, schedule_timeout_seconds=2))
    names = ["slow-0", "slow-1"]
    await create_pods(api, [member(n, namespace, "slow", scheduler, cpu="2") for n in names])

    def timed_out(group: dict[str, Any]) -> bool:
        return group_condition(group).get("reason") == "ScheduleTimeout"

    group = await wait_group(api, namespace, "slow", timed_out, "ScheduleTimeout", timeout=20)
    print(f"\nPodGroup created -> condition ScheduleTimeout: {time.monotonic() - began:.2f} s (timeout 2 s)")
    condition = group_condition(group)
    assert condition["status"] == "False" and group["status"]["phase"] == "Pending", group["status"]
    assert "(scheduleTimeoutSeconds); still trying: pod group" in condition["message"], condition
    assert "only 1 of 2 members can be placed" in condition["message"], condition
    pods = await wait_pods(api, namespace, lambda pods: len(pods) == 2, "both members")
    assert bound(pods, names) == [], describe(pods)

    await create_nodes(api, [make_node("slow-b", cpu="2")])
    pods = await wait_pods(api, namespace, lambda pods: len(bound(pods, names)) == 2, "both bound")
    assert {node_of(pods[n]) for n in names} == {"slow-a", "slow-b"}
    status = (await wait_group(api, namespace, "slow", _placed(2), "slow placed"))["status"]
    assert status["phase"] == "Scheduling", status


# --- preemption ---------------------------------------------------------------------------------------


def _victim(name: str, namespace: str, node: str, priority: int) -> dict[str, Any]:
    """A 2-cpu pod of another scheduler running on `node`, deleted at once (no kubelet here)."""
    pod = make_pod(name, namespace, "default-scheduler", cpu="2", priority=priority, node_name=node)
    pod["spec"]["terminationGracePeriodSeconds"] = 0
    return pod


async def test_a_high_priority_gang_evicts_what_it_needs_and_is_bound_whole(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    """Three 2-cpu members of priority 100 on two 4-cpu nodes holding three 2-cpu pods of priority 1:
    one member fits as things are, two need a victim each. Two victims go, not three, and the
    whole group is bound once they are gone."""
    await create_nodes(api, [make_node("evict-a", cpu="4"), make_node("evict-b", cpu="4")])
    lows = {"low-a0": "evict-a", "low-a1": "evict-a", "low-b0": "evict-b"}
    await create_pods(api, [_victim(name, namespace, node, 1) for name, node in lows.items()])
    await create_object(api, pod_group("strong", namespace, 3))
    names = [f"strong-{i}" for i in range(3)]
    await create_pods(
        api, [member(n, namespace, "strong", kubesched.scheduler_name, cpu="2", priority=100) for n in names]
    )

    pods = await wait_pods(api, namespace, lambda pods: len(bound(pods, names)) == 3, "the gang bound whole")
    gone = sorted(lows.keys() - pods.keys())
    assert len(gone) == 2, describe(pods)
    _assert_not_overcommitted(pods, {"evict-a": 4000, "evict-b": 4000})
    for name in gone:
        preempted = [
            e["message"] for e in await events_for(api, namespace, name) if e["reason"] == "Preempted"
        ]
        assert preempted and preempted[0].startswith(f"Preempted by {namespace}/strong-"), (name, preempted)


async def test_a_gang_waits_for_its_terminating_victims_instead_of_evicting_more(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    """Victims terminate for a while, as a kubelet stops them (none here: they stay Terminating until
    the test deletes them at once). Meanwhile the gang tries again and, as 1.20's
    PodEligibleToPreemptOthers has a pod do, waits for them instead of evicting others: two of the
    four pods of priority 1 go, and the group is bound whole once they are gone."""
    await create_nodes(api, [make_node("wait-a", cpu="4"), make_node("wait-b", cpu="4")])
    lows = {"low-a0": "wait-a", "low-a1": "wait-a", "low-b0": "wait-b", "low-b1": "wait-b"}
    victims = [_victim(name, namespace, node, 1) for name, node in lows.items()]
    for victim in victims:
        victim["spec"]["terminationGracePeriodSeconds"] = 3600
    await create_pods(api, victims)
    await create_object(api, pod_group("patient", namespace, 2))
    names = ["patient-0", "patient-1"]
    await create_pods(
        api, [member(n, namespace, "patient", kubesched.scheduler_name, cpu="2", priority=100) for n in names]
    )
    ending = f"preemption: {MSG_TERMINATING}"

    def waiting(pods: Pods) -> bool:
        return all(unschedulable_message(pods.get(n, {})).endswith(ending) for n in names)

    pods = await wait_pods(api, namespace, waiting, "both members waiting for their terminating victims")
    terminating = sorted(n for n in lows if pods[n]["metadata"].get("deletionTimestamp"))
    assert len(terminating) == 2, describe(pods)
    for name in terminating:  # the kubelet is done with them
        status, body = await request(
            api, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", {"gracePeriodSeconds": 0}
        )
        assert status == 200, body
    pods = await wait_pods(api, namespace, lambda pods: len(bound(pods, names)) == 2, "the gang bound whole")
    kept = sorted(lows.keys() - set(terminating))
    assert sorted(lows.keys() & pods.keys()) == kept, describe(pods)
    assert not any(pods[n]["metadata"].get("deletionTimestamp") for n in kept), describe(pods)
    _assert_not_overcommitted(pods, {"wait-a": 4000, "wait-b": 4000})


async def test_a_gang_that_would_not_fit_even_after_evictions_evicts_nobody(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    """Three 2-cpu members of priority 100; evictions could free two slots (the pods of priority 1),
    not three (the others have priority 1000). 1.20's per-pod preemption would evict for the first
    two members; a gang evicts nobody, as its members could not all be placed after."""
    await create_nodes(api, [make_node("keep-a", cpu="4"), make_node("keep-b", cpu="4")])
    others = {
        "low-0": ("keep-a", 1),
        "low-1": ("keep-a", 1),
        "high-0": ("keep-b", 1000),
        "high-1": ("keep-b", 1000),
    }
    await create_pods(api, [_victim(name, namespace, node, p) for name, (node, p) in others.items()])
    await create_object(api, pod_group("weak", namespace, 3))
    names = [f"weak-{i}" for i in range(3)]
    await create_pods(
        api, [member(n, namespace, "weak", kubesched.scheduler_name, cpu="2", priority=100) for n in names]
    )
    short = (
        f"pod group {namespace}/weak: only 0 of 3 members can be placed: "
        "0/2 nodes are available: 2 Insufficient cpu."
    )

    def told(pods: Pods) -> bool:
        return all(unschedulable_message(pods.get(n, {})).startswith(short) for n in names)

    await wait_pods(api, namespace, told, "the gang told it is short")
    # The group's status is written after the attempt that told the members: any eviction decided
    # then would have been sent by now.
    await wait_group(api, namespace, "weak", _reports("Pending", "only 0 of 3"), "weak Pending")
    pods = await pods_by_name(api, namespace)
    assert others.keys() <= pods.keys(), describe(pods)
    assert not any(pods[n]["metadata"].get("deletionTimestamp") for n in others), describe(pods)
    for name in others:
        assert not [e for e in await events_for(api, namespace, name) if e["reason"] == "Preempted"], name
    preempting = [
        line for line in kubesched.log().splitlines() if '"pod_preempting"' in line and "/weak-" in line
    ]
    assert preempting == [], preempting


# --- members that finish -----------------------------------------------------------------------------


@pytest.mark.parametrize("label", [POD_GROUP_LABEL, LEGACY_POD_GROUP_LABEL])
async def test_a_group_whose_member_fails_is_failed(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess, label: str
) -> None:
    """coscheduling's controller: Failed once a member failed and failed + running + succeeded reach
    minMember. A member that finishes leaves the pod watch (its field selector skips finished pods):
    its final phase must still be counted, not taken for a deletion."""
    names = await _running_group(api, namespace, kubesched.scheduler_name, "fail", label)
    await _set_phase(api, namespace, names[0], "Failed")
    group = await wait_group(
        api, namespace, "fail", _counts("Failed", running=1, failed=1), "fail Failed", 45
    )
    print(f"\none of two running members ({label}) failed -> status {_brief(group)}")


async def test_a_group_whose_members_succeed_is_finished(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    """coscheduling's controller: Finished once minMember members succeeded."""
    names = await _running_group(api, namespace, kubesched.scheduler_name, "done")
    await _set_phase(api, namespace, names[0], "Succeeded")
    await wait_group(api, namespace, "done", _counts("Running", running=1, succeeded=1), "one done", 45)
    await _set_phase(api, namespace, names[1], "Succeeded")
    group = await wait_group(api, namespace, "done", _counts("Finished", succeeded=2), "done Finished", 45)
    print(f"\nboth running members succeeded -> status {_brief(group)}")
    assert group_condition(group)["reason"] == "Placed", group["status"]


async def test_a_restarted_scheduler_counts_the_members_that_finished_while_it_was_down(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    """The finished members are listed at start-up."""
    names = await _running_group(api, namespace, kubesched.scheduler_name, "away")
    elected = kubesched.log().count('"leader_elected"')
    kubesched.stop()
    try:
        for name in names:
            await _set_phase(api, namespace, name, "Succeeded")
    finally:
        kubesched.start()
    await wait_for(
        lambda: kubesched.log().count('"leader_elected"') > elected, timeout=60, message="leading again"
    )
    group = await wait_group(api, namespace, "away", _counts("Finished", succeeded=2), "away Finished", 45)
    print(f"\nboth members succeeded while the scheduler was down -> status {_brief(group)}")


async def _running_group(
    api: ApiClient, namespace: str, scheduler: str, name: str, label: str = POD_GROUP_LABEL
) -> list[str]:
    """A PodGroup of two members (`label` naming it), bound and then Running (as their kubelet
    would report them)."""
    await create_nodes(api, [make_node(f"{namespace}-a", cpu="4")])
    await create_object(api, pod_group(name, namespace, 2))
    names = [f"{name}-0", f"{name}-1"]
    await create_pods(api, [make_pod(n, namespace, scheduler, cpu="1", labels={label: name}) for n in names])
    await wait_pods(api, namespace, lambda pods: len(bound(pods, names)) == 2, f"{name}: both bound")
    for pod in names:
        await _set_phase(api, namespace, pod, "Running")
    await wait_group(api, namespace, name, _counts("Running", running=2), f"{name} Running", 45)
    return names


async def _set_phase(api: ApiClient, namespace: str, pod: str, phase: str) -> None:
    """What a kubelet reports: the pod's phase, through the status subresource."""
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}/status"
    status, body = await request(api, "PATCH", path, {"status": {"phase": phase}}, content_type=MERGE_PATCH)
    assert status == 200, body


def _counts(phase: str, running: int = 0, succeeded: int = 0, failed: int = 0) -> Any:
    """A PodGroup check: this phase and these counters."""
    expected = (phase, running, succeeded, failed)

    def check(group: dict[str, Any]) -> bool:
        status = group.get("status") or {}
        return tuple(status.get(k, 0) for k in ("phase", "running", "succeeded", "failed")) == expected

    return check


def _brief(group: dict[str, Any]) -> str:
    status = group.get("status") or {}
    counts = " ".join(f"{k}={status.get(k, 0)}" for k in ("scheduled", "running", "succeeded", "failed"))
    return f"phase {status.get('phase')} {counts} reason {group_condition(group).get('reason')}"


# --- helpers ---------------------------------------------------------------------------------------


def _reports(phase: str, fragment: str) -> Any:
    """A PodGroup check: this phase, and a False Scheduled condition whose message holds `fragment`."""

    def check(group: dict[str, Any]) -> bool:
        condition = group_condition(group)
        return (
            (group.get("status") or {}).get("phase") == phase
            and condition.get("status") == "False"
            and fragment in str(condition.get("message") or "")
        )

    return check


def _placed(scheduled: int) -> Any:
    """A PodGroup check: `scheduled` members bound and the Scheduled condition True."""

    def check(group: dict[str, Any]) -> bool:
        status = group.get("status") or {}
        return status.get("scheduled") == scheduled and group_condition(group).get("status") == "True"

    return check


def _assert_not_overcommitted(pods: Pods, allocatable_milli_cpu: dict[str, int]) -> None:
    by_node: dict[str, list[Any]] = {}
    for raw in pods.values():
        if node_of(raw) and not raw["metadata"].get("deletionTimestamp"):
            by_node.setdefault(node_of(raw), []).append(pod_from_dict(raw))
    for node, capacity in allocatable_milli_cpu.items():
        used = sum_resources(p.requests for p in by_node.get(node, [])).milli_cpu
        assert used <= capacity, f"{node}: {used}m of {capacity}m requested\n{describe(pods)}"
