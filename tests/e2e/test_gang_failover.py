"""Gangs across a failover: the leader SIGKILLed while it binds PodGroups' members, as in
test_ha.py. A group it had partly bound is completed by the next leader (the members bound count
toward minMember), and none is left with fewer than minMember members bound once all settles.

Run with -s to read the figures printed.
"""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.election import JITTER
from kubesched_dev.fixtures import create_pods, wait_for

from ..integration.kubeapi import pods_by_name
from ..integration.podgroups import (
    Pods,
    bound,
    create_object,
    delete_namespace,
    get_pod_group,
    group_condition,
    member,
    pod_group,
)
from .replicas import (
    FAST,
    POD_CPU,
    SLACK,
    LeaseHistory,
    Replica,
    add_nodes,
    check_binds_against_leadership,
    check_every_pod_bound_once,
    election_args,
    election_story,
    leader_of,
    new_leader,
    wait_all_bound,
)

GROUPS = 60
MEMBERS = 5  # each group has one member beyond minMember
MIN_MEMBER = 4
NODES = 30  # 630 pods' room for 300
KILL_AFTER = 60  # binds
# Binds one after another, at the pace of a rate-limited client: the kill lands inside a group.
PACED = ["--kube-api-qps", "40", "--kube-api-burst", "1"]
IN_FLIGHT = 64  # --bind-concurrency: the binds a killed leader may have had in flight


@pytest_asyncio.fixture
async def _pod_groups_deleted(api: ApiClient, namespace: str) -> AsyncIterator[None]:
    yield
    await delete_namespace(api, namespace)


@pytest.mark.timeout(300)
async def test_a_leader_killed_while_binding_gangs_leaves_every_group_bound_whole(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    start_replicas: Callable[..., list[Replica]],
    lease_history: LeaseHistory,
    _pod_groups_deleted: None,
) -> None:
    lease, _, retry = FAST
    await add_nodes(api, namespace, NODES)
    replicas = start_replicas(2, scheduler_name, [*election_args(FAST), *PACED])
    first = await wait_for(lambda: leader_of(replicas), timeout=60, message="a leader")
    await wait_for(lambda: all(r.named("cache_synced") for r in replicas), timeout=60)

    groups = {f"g{i:02}": [f"g{i:02}-m{j}" for j in range(MEMBERS)] for i in range(GROUPS)}
    for name in groups:
        await create_object(api, pod_group(name, namespace, MIN_MEMBER))
    pods = [
        member(m, namespace, g, scheduler_name, cpu=POD_CPU, memory="64Mi")
        for g, names in groups.items()
        for m in names
    ]
    random.Random(0).shuffle(pods)  # groups fill up at different moments, some across the kill
    creating = asyncio.create_task(create_pods(api, pods))

    def short(pods: Pods) -> dict[str, int]:
        """The groups with some members bound, but fewer than minMember."""
        return {g: n for g, names in groups.items() if 0 < (n := _bound(pods, names)) < MIN_MEMBER}

    async def moment_to_kill() -> bool:
        # Best while a group is being bound (the API shows it short of minMember); else at last anyway.
        if len(first.binds()) < KILL_AFTER:
            return False
        return bool(short(await pods_by_name(api, namespace))) or len(first.binds()) >= 3 * KILL_AFTER

    await wait_for(moment_to_kill, timeout=120, interval=0.01, message=f"{KILL_AFTER} bound")
    killed_at = first.signal(signal.SIGKILL)
    before_kill = len(first.binds())
    partial = short(await pods_by_name(api, namespace))  # the binds sent before the kill have landed
    survivors = [r for r in replicas if r is not first]
    limit = lease + retry * (1 + JITTER) + 2 * retry + SLACK
    second, since = await new_leader(survivors, killed_at, timeout=limit + 5)
    print(
        f"\nSIGKILL after {before_kill} binds logged; groups short of minMember after it: {partial}; "
        "new leader after "
        f"{since - killed_at:.2f} s"
    )
    assert since - killed_at <= limit, election_story(survivors, killed_at)

    await creating
    await wait_all_bound(api, namespace, timeout=120)
    await asyncio.sleep(0.5)  # the last pod_bound lines reach the logs
    total = GROUPS * MEMBERS
    assert before_kill < total and second.binds(), "the kill came after every bind: nothing was tested"
    await check_every_pod_bound_once(api, namespace, total, replicas, IN_FLIGHT)
    check_binds_against_leadership(replicas, lease_history)
    final = await pods_by_name(api, namespace)
    counts = {g: _bound(final, names) for g, names in groups.items()}
    assert all(n == 0 or n >= MIN_MEMBER for n in counts.values()), counts
    assert set(counts.values()) == {MEMBERS}, counts

    # The new leader writes every group's status: all placed.
    left: list[str] = []

    async def all_placed() -> bool:
        left.clear()
        for g in groups:
            status = (await get_pod_group(api, namespace, g)).get("status") or {}
            shown = (
                status.get("phase"),
                status.get("scheduled"),
                group_condition({"status": status}).get("status"),
            )
            if shown != ("Scheduling", MEMBERS, "True"):
                left.append(f"{g}: {status}")
        return not left

    try:
        await wait_for(all_placed, timeout=30, interval=0.5)
    except TimeoutError:
        raise AssertionError(f"PodGroup statuses not all placed: {left[:5]}") from None


def _bound(pods: Pods, names: list[str]) -> int:
    return len(bound(pods, names))
