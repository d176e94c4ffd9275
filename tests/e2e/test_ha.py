"""High availability with real `kubesched run` processes sharing one scheduler name and one Lease.

What is checked is what a user could check: the pods in the API (each bound once, no node
overcommitted), the Lease as it changed over time (polled), and each replica's JSON log, where it
records its terms (`leader_elected` since, `leader_lost` until) and every bind with the wall-clock
moment the request left (`pod_bound` sent_at). A bind is legitimate only if the Lease named its
replica at that moment.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from collections.abc import Callable
from datetime import datetime

import pytest
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.election import JITTER
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import create_pods, wait_for

from .replicas import (
    DEFAULT,
    FAST,
    SLACK,
    LeaseHistory,
    Replica,
    add_nodes,
    bound_count,
    check_binds_against_leadership,
    check_endpoints,
    check_every_pod_bound_once,
    election_args,
    election_story,
    leader_of,
    new_leader,
    pods_for,
    wait_all_bound,
)
from .scheduled_events import KILLED_EVENTS_WINDOW, sent_before_kill, wait_scheduled_events


async def failover_run(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    start_replicas: Callable[..., list[Replica]],
    history: LeaseHistory,
    timings: tuple[float, float, float],
) -> None:
    lease, _, retry = timings
    pod_count, node_count = 2000, 100
    await add_nodes(api, namespace, node_count)
    replicas = start_replicas(3, scheduler_name, election_args(timings))
    first = await wait_for(lambda: leader_of(replicas), timeout=60, message="a leader")
    await wait_for(lambda: all(r.named("cache_synced") for r in replicas), timeout=60)
    await check_endpoints(replicas, first, scheduler_name)

    creating = asyncio.create_task(create_pods(api, pods_for(namespace, scheduler_name, pod_count)))
    await wait_for(lambda: len(first.binds()) >= 500, timeout=120, message="500 pods bound")
    assert [r for r in replicas if r.binds()] == [first], "only the leader binds"

    killed_at = first.signal(signal.SIGKILL)
    before_kill = len(first.binds())
    survivors = [r for r in replicas if r is not first]
    # A lease duration after the survivors last saw a renewal, and within a retry period of that;
    # one of their reads may hang for its whole round budget (two retry periods) before it is cut.
    bound = lease + retry * (1 + JITTER) + 2 * retry + SLACK
    second, since = await new_leader(survivors, killed_at, timeout=bound + 5)
    failover = since - killed_at
    print(
        f"\nSIGKILL failover: {failover:.2f} s (lease {lease} s, retry {retry} s); {before_kill} bound before"
    )
    assert failover <= bound, election_story(survivors, killed_at)

    await wait_for(lambda: bound_count(replicas) >= 1400, timeout=180, message="1,400 pods bound")
    termed_at = second.signal(signal.SIGTERM)
    _, since = await new_leader([r for r in survivors if r is not second], termed_at, timeout=30)
    released = second.named("lease_released")
    assert released, "the leader released its lease on SIGTERM"
    released_at = datetime.fromisoformat(released[0]["timestamp"].replace("Z", "+00:00")).timestamp()
    handover = since - released_at
    print(
        f"SIGTERM hand-over: {handover:.2f} s after the release, {since - termed_at:.2f} s after the signal "
        f"(retry {retry} s)"
    )
    # The survivors watch the Lease: the release wakes them at once, not at their next poll.
    assert handover <= SLACK, election_story(survivors, termed_at)
    assert second.proc.proc is not None and second.proc.proc.wait(30) == 0

    await creating
    await wait_all_bound(api, namespace, timeout=240)
    await asyncio.sleep(0.5)  # the last pod_bound lines reach the logs
    lost = 64  # --bind-concurrency: the binds a killed leader may have had in flight
    await check_every_pod_bound_once(api, namespace, pod_count, replicas, lost)
    check_binds_against_leadership(replicas, history)
    # Every logged bind has its Scheduled event, the SIGTERMed leader's too (it sends what is queued
    # before it exits); only the SIGKILLed leader's last moments' events die with it, as they would
    # with kube-scheduler.
    binds = [b for r in replicas for b in r.binds()]
    last_moments = sent_before_kill(first.binds(), killed_at)
    events = await wait_scheduled_events(api, namespace, binds, may_miss=last_moments)
    print(
        f"Scheduled events: {len(binds) - len(events.missed)} of the {len(binds)} logged binds (waited "
        f"{events.waited:.1f} s; the latest stored {events.worst_delay(binds):.0f} s after its bind); "
        f"missing: {len(events.missed)} of the {len(last_moments)} the killed leader sent in its last "
        f"{KILLED_EVENTS_WINDOW:g} s"
    )
    # leaseTransitions counts the changes of holder (a replica taking back its own Lease is none).
    holders = [identity for _, identity in sorted((s, r.identity) for r in replicas for s, _ in r.terms())]
    assert history.transitions == sum(1 for a, b in itertools.pairwise(holders) if a != b) >= 2
    by_leader = sorted(replicas, key=lambda r: min((since for since, _ in r.terms()), default=float("inf")))
    print(f"binds by the first, second and third leader: {[len(r.binds()) for r in by_leader]}")


@pytest.mark.timeout(420)
async def test_three_replicas_one_binds_and_fails_over_on_sigkill_and_sigterm(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    start_replicas: Callable[..., list[Replica]],
    lease_history: LeaseHistory,
) -> None:
    await failover_run(api, namespace, scheduler_name, start_replicas, lease_history, FAST)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_failover_with_kube_scheduler_default_timings(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    start_replicas: Callable[..., list[Replica]],
    lease_history: LeaseHistory,
) -> None:
    await failover_run(api, namespace, scheduler_name, start_replicas, lease_history, DEFAULT)


@pytest.mark.timeout(300)
async def test_a_frozen_api_server_stops_the_leader_before_anyone_else_binds(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    control_plane: LocalControlPlane,
    start_replicas: Callable[..., list[Replica]],
    lease_history: LeaseHistory,
) -> None:
    lease, renew, retry = FAST
    pod_count = 500
    await add_nodes(api, namespace, 25)
    replicas = start_replicas(2, scheduler_name, election_args(FAST))
    first = await wait_for(lambda: leader_of(replicas), timeout=60, message="a leader")
    await wait_for(lambda: all(r.named("cache_synced") for r in replicas), timeout=60)
    creating = asyncio.create_task(create_pods(api, pods_for(namespace, scheduler_name, pod_count)))
    await wait_for(lambda: len(first.binds()) >= 100, timeout=120, message="100 pods bound")

    apiserver = control_plane.apiserver
    assert apiserver is not None
    paused_at = time.time()
    apiserver.send(signal.SIGSTOP)
    try:
        await asyncio.sleep(lease + 2 * retry)  # past the renew deadline, and past the lease too
    finally:
        apiserver.send(signal.SIGCONT)
    resumed_at = time.time()

    await creating
    await wait_all_bound(api, namespace, timeout=180)
    await asyncio.sleep(0.5)
    lost = [e for e in first.named("leader_lost") if float(e["until"]) > paused_at]
    assert lost and lost[0]["reason"] == "renew deadline passed without a renewal", lost
    stopped = float(lost[0]["until"])
    print(
        f"\nAPI server frozen {resumed_at - paused_at:.1f} s: the leader stopped binding "
        f"{stopped - paused_at:.2f} s into it (renew deadline {renew} s)"
    )
    assert stopped <= paused_at + renew + 0.05
    late = [b for r in replicas for b in r.binds() if stopped < b.sent_at < resumed_at]
    assert late == [], "nothing is sent while no replica may bind"
    await check_every_pod_bound_once(api, namespace, pod_count, replicas)
    check_binds_against_leadership(replicas, history=lease_history)
    # The events of binds made just before the freeze were kept and sent once it thawed.
    binds = [b for r in replicas for b in r.binds()]
    events = await wait_scheduled_events(api, namespace, binds)
    print(
        f"Scheduled events: one for each of the {len(binds)} logged binds (waited {events.waited:.1f} s; "
        f"the latest stored {events.worst_delay(binds):.0f} s after its bind)"
    )
    after = [(r.proc.name, since) for r in replicas for since, _ in r.terms() if since > paused_at]
    print(
        f"leader before the freeze: {first.proc.name}; after it: "
        f"{[(n, round(s - resumed_at, 2)) for n, s in after]} (s after resuming)"
    )
