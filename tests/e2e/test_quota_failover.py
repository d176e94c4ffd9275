"""ElasticQuotas across a failover (issue 36, acceptance case 9): the leader SIGKILLed in the middle of
a burst its quotas cap, as in test_ha.py. Three quotas borrow up to a max below their demand (a
fourth, idle, lends its min); a few bound pods go right after the kill, so the new leader must count
both what the old one bound and what left. A poller lists the pods all along: no namespace's bound
pods ever ask for more than its max. At the end every quota holds exactly its max, each bound pod
was bound once (one bind logged, at most one Scheduled event, naming its node), and `status.used`
says so.

Run with -s to read what was seen.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched.kube.election import JITTER
from kubesched.kube.reasons import SCHEDULED
from kubesched.model.objects import pod_from_dict
from kubesched.model.quota import in_one_unit
from kubesched_dev import fixtures as testing
from kubesched_dev.fixtures import create_pods, make_pod, wait_for

from ..integration.podgroups import delete_namespace, failed_scheduling
from ..integration.quotas import create_quota, delete_quotas, elastic_quota, wait_used
from .replicas import (
    FAST,
    SLACK,
    LeaseHistory,
    Replica,
    add_nodes,
    check_binds_against_leadership,
    election_args,
    election_story,
    leader_of,
    new_leader,
)
from .scheduled_events import sent_before_kill, wait_scheduled_events

POD_MILLI = 100
DEMAND = 40  # pods per namespace, each 100m: every quota's max is below it
MAX_MILLI = {"a": 2000, "b": 3000, "c": 2500}  # 20, 30 and 25 pods
MIN_MILLI = 1000  # each: all three borrow beyond their min...
LENDER_MIN_MILLI = 10_000  # ...from the idle fourth quota's min (the sum of mins is no limit here)
NODES = 10  # 210 pods' room: only the quotas limit
KILL_AFTER = 20  # binds of the first leader
DELETE_EACH = 3  # bound pods deleted per namespace right after the kill, before a new leader
# Binds one after another at a rate-limited client's pace: the kill lands inside the burst.
PACED = ["--kube-api-qps", "20", "--kube-api-burst", "1"]
IN_FLIGHT = 64  # --bind-concurrency: the binds a killed leader may have had in flight
LABEL = "quota-burst"


@dataclass
class Poller:
    """Lists the burst's pods again and again: per namespace, the cpu its bound pods request."""

    api: ApiClient
    selector: str
    maxima: dict[str, int]  # namespace -> its quota's max, millicores
    polls: int = 0
    peak: dict[str, int] = field(default_factory=dict)
    over: list[str] = field(default_factory=list)  # what each poll over a max saw

    async def run(self) -> None:
        while True:
            status, body = await request(
                self.api, "GET", "/api/v1/pods", query=[("labelSelector", self.selector)]
            )
            if status == 200:
                self.record(body["items"])
            await asyncio.sleep(0.05)

    def record(self, items: list[dict[str, Any]]) -> None:
        self.polls += 1
        used: Counter[str] = Counter()
        for raw in items:
            if raw["spec"].get("nodeName"):
                used[raw["metadata"]["namespace"]] += pod_from_dict(raw).requests.milli_cpu
        for namespace, milli in used.items():
            self.peak[namespace] = max(self.peak.get(namespace, 0), milli)
            if milli > self.maxima[namespace]:
                self.over.append(f"poll {self.polls} at {time.time():.3f}: {namespace} uses {milli}m")


@pytest_asyncio.fixture
async def quota_namespaces(api: ApiClient, namespace: str) -> AsyncIterator[dict[str, str]]:
    """The burst's three namespaces and the lender's, by letter; their quotas and pods deleted after."""
    made = {x: f"{namespace}-{x}" for x in "abcd"}
    for name in made.values():
        await testing.create_namespace(api, name)
    yield made
    for name in made.values():
        await delete_quotas(api, name)
        await delete_namespace(api, name)


@pytest.mark.timeout(300)
async def test_a_leader_killed_in_a_quota_bound_burst_never_passes_a_max(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    start_replicas: Callable[..., list[Replica]],
    lease_history: LeaseHistory,
    quota_namespaces: dict[str, str],
) -> None:
    lease, _, retry = FAST
    ns = quota_namespaces
    await add_nodes(api, namespace, NODES)
    for x, max_milli in MAX_MILLI.items():
        await create_quota(
            api, elastic_quota("quota", ns[x], {"cpu": f"{MIN_MILLI}m"}, {"cpu": f"{max_milli}m"})
        )
    lend = f"{LENDER_MIN_MILLI}m"
    await create_quota(api, elastic_quota("quota", ns["d"], {"cpu": lend}, {"cpu": lend}))
    replicas = start_replicas(2, scheduler_name, [*election_args(FAST), *PACED])
    first = await wait_for(lambda: leader_of(replicas), timeout=60, message="a leader")
    await wait_for(lambda: all(r.named("cache_synced") for r in replicas), timeout=60)

    poller = Poller(api, f"{LABEL}={scheduler_name}", {ns[x]: m for x, m in MAX_MILLI.items()})
    polling = asyncio.create_task(poller.run())
    try:
        pods = [
            make_pod(f"{x}{i:02}", ns[x], scheduler_name, cpu=f"{POD_MILLI}m", labels={LABEL: scheduler_name})
            for x in MAX_MILLI
            for i in range(DEMAND)
        ]
        for pod in pods:
            pod["spec"]["terminationGracePeriodSeconds"] = 0
        random.Random(0).shuffle(pods)  # the quotas fill up together, across the kill
        creating = asyncio.create_task(create_pods(api, pods))

        await wait_for(lambda: len(first.binds()) >= KILL_AFTER, timeout=120, interval=0.01, message="binds")
        killed_at = first.signal(signal.SIGKILL)
        before_kill = len(first.binds())
        polls_at_kill = poller.polls
        deleted = await delete_bound(api, ns, DELETE_EACH)
        survivors = [r for r in replicas if r is not first]
        limit = lease + retry * (1 + JITTER) + 2 * retry + SLACK
        second, since = await new_leader(survivors, killed_at, timeout=limit + 5)
        print(
            f"\nSIGKILL after {before_kill} binds logged, then {len(deleted)} bound pods deleted; "
            f"new leader after {since - killed_at:.2f} s"
        )
        assert since - killed_at <= limit, election_story(survivors, killed_at)
        await creating

        expected = {ns[x]: m // POD_MILLI for x, m in MAX_MILLI.items()}
        counts: dict[str, int] = {}

        async def all_full() -> bool:
            assert not poller.over, f"over a max: {poller.over[:10]}"  # no need to wait on
            counts.clear()
            for name in expected:
                counts[name] = len(await bound_pods(api, name))
            return counts == expected

        try:
            await wait_for(all_full, timeout=120, interval=0.5)
        except TimeoutError:
            raise AssertionError(
                f"bound per namespace {counts}, expected {expected}; over a max: {poller.over[:10]}"
            ) from None
        for x, max_milli in MAX_MILLI.items():  # the new leader's accounting, as the status shows it
            await wait_used(api, ns[x], "quota", {"cpu": in_one_unit("cpu", max_milli)[0]})
        for x in MAX_MILLI:  # the pods left out are told why
            await wait_for(lambda x=x: told_over_max(api, ns[x]), timeout=30, message=f"{ns[x]} told")
    finally:
        polling.cancel()
        await asyncio.gather(polling, return_exceptions=True)

    print(
        f"{polls_at_kill} polls before the kill, {poller.polls} in all; "
        f"peak use {poller.peak}; maxima {poller.maxima}"
    )
    assert polls_at_kill and poller.polls - polls_at_kill >= 5, "too few polls to have watched the burst"
    assert not poller.over, poller.over[:10]
    assert before_kill < sum(expected.values()) and second.binds(), "the kill came after every bind"

    # Bound once: one bind logged per pod, landed where it was logged, and one Scheduled event.
    binds = [b for r in replicas for b in r.binds()]
    logged = Counter(b.pod for b in binds)
    assert max(logged.values()) == 1, [pod for pod, n in logged.items() if n > 1]
    cancelled = sum(len(r.named("bind_cancelled")) for r in replicas)
    for x in MAX_MILLI:
        placed = await bound_pods(api, ns[x])
        mine = [b for b in binds if b.pod.split("/", 1)[0] == ns[x] and b.pod.split("/", 1)[1] in placed]
        for bind in mine:
            name = bind.pod.split("/", 1)[1]
            assert placed[name] == bind.node, f"{bind.pod} logged on {bind.node}, bound to {placed[name]}"
        unlogged = set(placed) - {b.pod.split("/", 1)[1] for b in mine}
        assert len(unlogged) <= IN_FLIGHT + cancelled, (
            f"{ns[x]}: bound with no replica logging it: {unlogged}"
        )
        await wait_scheduled_events(api, ns[x], mine, may_miss=sent_before_kill(first.binds(), killed_at))
        twice = await scheduled_more_than_once(api, ns[x])
        assert not twice, f"{ns[x]}: pods with more than one Scheduled event: {twice}"
    check_binds_against_leadership(replicas, lease_history)


async def pods_named(api: ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    status, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods")
    assert status == 200, body
    return {p["metadata"]["name"]: p for p in body["items"]}


async def bound_pods(api: ApiClient, namespace: str) -> dict[str, str]:
    """Pod name -> node, for the namespace's bound pods."""
    return {
        name: p["spec"]["nodeName"]
        for name, p in (await pods_named(api, namespace)).items()
        if p["spec"].get("nodeName")
    }


async def told_over_max(api: ApiClient, namespace: str) -> bool:
    """Whether every pending pod of `namespace` has a FailedScheduling event naming its quota's max."""
    pods = await pods_named(api, namespace)
    pending = [name for name, p in pods.items() if not p["spec"].get("nodeName")]
    needle = f"ElasticQuota {namespace}/quota: over max"
    for name in pending:
        if not any(needle in m for m in await failed_scheduling(api, namespace, name)):
            return False
    return bool(pending)


async def delete_bound(api: ApiClient, ns: dict[str, str], each: int) -> list[str]:
    """Delete up to `each` bound pods of every burst namespace, at once (no kubelet to wait for)."""
    deleted = []
    for x in MAX_MILLI:
        for name in sorted(await bound_pods(api, ns[x]))[:each]:
            status, body = await request(
                api, "DELETE", f"/api/v1/namespaces/{ns[x]}/pods/{name}", {"gracePeriodSeconds": 0}
            )
            assert status in (200, 404), body
            deleted.append(f"{ns[x]}/{name}")
    return deleted


async def scheduled_more_than_once(api: ApiClient, namespace: str) -> dict[str, int]:
    """The pods whose Scheduled events (counting repeats folded into one) number more than one."""
    status, body = await request(
        api, "GET", f"/api/v1/namespaces/{namespace}/events", query=[("fieldSelector", f"reason={SCHEDULED}")]
    )
    assert status == 200, body
    seen: Counter[str] = Counter()
    for event in body["items"]:
        seen[event["involvedObject"]["name"]] += int(event.get("count") or 1)
    return {pod: n for pod, n in seen.items() if n > 1}
