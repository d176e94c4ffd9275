"""Nothing lost under faults: a real `kubesched run` against a control plane that misbehaves.

Each test injects one kind of fault while pods are being scheduled (the API server restarted,
etcd frozen, a watch gap hiding deletions, nodes and pods deleted between decision and bind, a
leader killed mid-burst, a hanging extender, a client QPS far below the load) and then checks
what a user would: every pod bound exactly once, no node overcommitted, and the scheduler's cache
equal to a fresh listing (`/debug/cache`). Each prints a `FAULT |` line with its figures; the
`slow` variants (`make test-reliability`) run the same scenarios bigger and longer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched.runtime.scheduler import SchedulerSettings
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import create_nodes, create_pods, make_node, make_pod, wait_for

from ..extender_server import ExtenderProcess
from .replicas import (
    FAST,
    SEED_POLICY,
    FaultFigures,
    LeaseHistory,
    Replica,
    add_nodes,
    bound_count,
    check_binds_against_leadership,
    check_cache_consistent,
    check_every_pod_bound_once,
    election_args,
    first_bind_after,
    leader_of,
    logged_at,
    new_leader,
    placement_figures,
    pods_for,
    wait_all_bound,
)
from .scheduled_events import wait_scheduled_events

# One replica, always scheduling; the cache compared with a listing every few seconds.
SOLO = ["--leader-elect=false", "--cache-reconcile-interval=3s"]
StartReplicas = Callable[..., list[Replica]]
SEED_POLICY_TEXT = SEED_POLICY.read_text()


async def settle(api: ApiClient, timeout: float = 60.0) -> None:
    """Wait until the API server answers again (the client's pooled connections died with it)."""

    async def answers() -> bool:
        with contextlib.suppress(Exception):
            status, _ = await request(api, "GET", "/api/v1/namespaces/default", timeout=5)
            return status == 200
        return False

    await wait_for(answers, timeout=timeout, interval=0.5, message="the API server answers")


async def report(
    api: ApiClient,
    namespace: str,
    replicas: list[Replica],
    fault: str,
    injections: int,
    pods: int,
    recovery: float | None,
) -> FaultFigures:
    """Print the fault's figures and insist on none lost, none double-bound, none overcommitted."""
    scheduled, double, over = await placement_figures(api, namespace, replicas)
    result = FaultFigures(fault, injections, pods, scheduled, double, over, recovery)
    result.print()
    assert (result.lost, result.double_bound, result.overcommitted) == (0, 0, 0), result
    return result


def nodes_for(pods: int) -> int:
    """Room for every pod with a third to spare (21 pods fit a node)."""
    return max(40, pods // 14)


async def solo_run(
    api: ApiClient,
    namespace: str,
    start_replicas: StartReplicas,
    pods: int,
    nodes: int,
    args: list[str] | None = None,
) -> Replica:
    """Nodes and pending pods first, then one scheduler: a fault can hit a known point of its run."""
    await add_nodes(api, namespace, nodes)
    await create_pods(api, pods_for(namespace, namespace, pods))
    (replica,) = start_replicas(1, namespace, [*SOLO, *(args or [])])
    return replica


# ------------------------------------------------------------------------- API server and etcd


async def restart_api_server(control_plane: LocalControlPlane, api: ApiClient, _: float) -> float:
    """Returns when the fault ended: here when the API server started again (it serves before the
    control plane's own readiness check passes, so recovery counts its start-up, ~5-10 s)."""
    control_plane.stop_apiserver()  # watches and pooled connections break
    starting = time.time()
    control_plane.start_apiserver()
    await settle(api)
    return starting


async def pause_etcd(control_plane: LocalControlPlane, api: ApiClient, seconds: float) -> float:
    control_plane.pause_etcd()  # every request hangs in the API server meanwhile
    try:
        await asyncio.sleep(seconds)
    finally:
        control_plane.resume_etcd()
    return time.time()


CONTROL_PLANE_FAULTS = {"API server restarted": restart_api_server, "etcd paused": pause_etcd}


@pytest.mark.parametrize(
    ("fault", "pods", "injections", "seconds"),
    [
        ("API server restarted", 600, 1, 0.0),
        ("etcd paused", 500, 1, 5.0),
        pytest.param(
            "API server restarted", 2000, 3, 0.0, marks=[pytest.mark.slow, pytest.mark.timeout(900)]
        ),
        pytest.param("etcd paused", 2000, 2, 20.0, marks=[pytest.mark.slow, pytest.mark.timeout(900)]),
    ],
)
@pytest.mark.timeout(300)
async def test_control_plane_faults_lose_no_pod(
    api: ApiClient,
    namespace: str,
    control_plane: LocalControlPlane,
    start_replicas: StartReplicas,
    fault: str,
    pods: int,
    injections: int,
    seconds: float,
) -> None:
    replica = await solo_run(api, namespace, start_replicas, pods, nodes_for(pods))
    resumed = 0.0
    injected: list[float] = []
    for i in range(injections):  # spread over the run, each once a share of the pods is bound
        target = pods * (i + 1) // (injections + 2)
        await wait_for(lambda t=target: len(replica.binds()) >= t, timeout=180)
        injected.append(time.time())
        resumed = await CONTROL_PLANE_FAULTS[fault](control_plane, api, seconds)
    await wait_all_bound(api, namespace, timeout=240)
    await asyncio.sleep(0.5)  # the last pod_bound lines reach the log
    name = f"{fault} {seconds:g} s" if seconds else fault
    await report(api, namespace, [replica], name, injections, pods, first_bind_after([replica], resumed))
    # A request that got no reply pauses binding: the binds already on their way fail (at most
    # --bind-concurrency), the others wait for the server instead of failing and backing off one
    # after another. A request cut off by an API server that stops gets no reply (unreachable);
    # with etcd paused the API server holds the binds until it resumes (a timeout would count as
    # unreachable too: no reply came). Failed requests of either kind, per injection:
    failures = replica.named("bind_failed") + replica.named("bind_unreachable")
    per_injection = [0] * injections
    for event in failures:  # counted against the last injection before it (the first, if none)
        per_injection[max(sum(1 for at in injected if at <= logged_at(event)) - 1, 0)] += 1
    flag = [a.split("=", 1)[1] for a in replica.proc.args if a.startswith("--bind-concurrency=")]
    concurrency = int(flag[-1]) if flag else SchedulerSettings().bind_concurrency
    # A bind whose reply the fault cut off may have landed all the same: the watch shows where
    # (or the bind sent again meets 409). Bound once, but never logged as pod_bound: each such pod
    # must be one whose request failed.
    _, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods")
    unlogged = {f"{namespace}/{p['metadata']['name']}" for p in body["items"]} - {
        b.pod for b in replica.binds()
    }
    failed = {e["pod"] for e in failures}
    assert unlogged <= failed, sorted(unlogged - failed)[:5]
    print(
        f"binds failed per injection: {per_injection} (--bind-concurrency {concurrency}; bind_failed "
        f"{len(replica.named('bind_failed'))}, unreachable {len(replica.named('bind_unreachable'))}); "
        f"pauses {len(replica.named('api_unreachable'))}; landed unseen: {len(unlogged)}"
    )
    assert max(per_injection) <= concurrency, per_injection
    await check_every_pod_bound_once(api, namespace, pods, [replica], lost_in_flight=len(unlogged))
    await check_cache_consistent(api, replica)
    # Every bind the scheduler saw succeed has its Scheduled event, those just before the fault too
    # (kept and retried while the API server was away). A bind whose reply was lost has none, as
    # with kube-scheduler: it was reported as failed.
    binds = replica.binds()
    events = await wait_scheduled_events(api, namespace, binds)
    print(
        f"Scheduled events: one for each of the {len(binds)} logged binds (waited {events.waited:.1f} s; "
        f"the latest stored {events.worst_delay(binds):.0f} s after its bind)"
    )


# ------------------------------------------------------------------------------ the watch gap


class Etcd:
    """etcd's v3 JSON gateway: what the test does behind the API server's back."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with aiohttp.ClientSession() as session, session.post(f"{self.url}/v3/{path}", json=body) as r:
            assert r.status == 200, await r.text()
            result: dict[str, Any] = await r.json(content_type=None)
            return result

    async def delete(self, key: str) -> int:
        reply = await self.post("kv/deleterange", {"key": _b64(key)})
        return int(reply.get("deleted", 0))

    async def compact(self) -> int:
        """Compact away all history up to now: a watch from an older resourceVersion gets 410 Gone."""
        revision = int((await self.post("kv/range", {"key": _b64("/registry/")}))["header"]["revision"])
        await self.post("kv/compaction", {"revision": revision, "physical": True})
        return revision


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.timeout(300)
async def test_objects_deleted_during_a_watch_gap_leave_the_cache(
    api: ApiClient, namespace: str, control_plane: LocalControlPlane, start_replicas: StartReplicas
) -> None:
    """The API server goes away; meanwhile a node and a bound pod vanish (straight from etcd, so no
    watch can ever tell) and history is compacted. The watches come back with 410 Gone and re-list,
    which says nothing of what vanished: the reconciliation must drop both."""
    replica = await solo_run(api, namespace, start_replicas, 40, 4)
    await wait_all_bound(api, namespace, timeout=120)
    await check_cache_consistent(api, replica)
    _, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods")
    victim = body["items"][0]
    doomed = f"{namespace}-n000"
    etcd = Etcd(control_plane.etcd_url)
    control_plane.stop_apiserver()
    gap_started = time.time()
    try:
        assert await etcd.delete(f"/registry/minions/{doomed}") == 1
        assert await etcd.delete(f"/registry/pods/{namespace}/{victim['metadata']['name']}") == 1
        await etcd.compact()
    finally:
        starting = time.time()
        control_plane.start_apiserver()
    back = time.time()
    await settle(api)

    async def dropped() -> bool:
        with contextlib.suppress(aiohttp.ClientError):
            _, text = await replica.get("/debug/cache")
            cache = json.loads(text)
            held = {uid for n in cache["nodes"].values() for uid in n["pods"]}
            held |= {uid for uids in cache["orphans"].values() for uid in uids}
            return doomed not in cache["nodes"] and victim["metadata"]["uid"] not in held
        return False

    await wait_for(dropped, timeout=60, interval=0.25, message="the vanished node and pod leave the cache")
    # The gap is over: new pods go only where nodes are.
    more = [make_pod(f"late{i:03}", namespace, namespace, cpu="100m", memory="64Mi") for i in range(20)]
    await create_pods(api, more)
    await wait_all_bound(api, namespace, timeout=120)
    _, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods")
    late = [p for p in body["items"] if p["metadata"]["name"].startswith("late")]
    assert late and all(p["spec"]["nodeName"] != doomed for p in late)
    await check_cache_consistent(api, replica)
    # The node and pod watches re-list on their 410 and drop what their listing lacks (or the
    # periodic reconciliation does, if it comes first).
    assert replica.named("watch_expired"), "no watch saw 410 Gone"
    reconciled = replica.named("cache_reconciled")
    removed = [(r["nodes_removed"], r["pods_removed"]) for r in reconciled]
    assert tuple(map(sum, zip(*removed, strict=True))) == (1, 1), removed
    # From the API server starting again to the reconciliation that dropped the last of them (the
    # listing may succeed before the control plane's own readiness check does).
    recovery = logged_at(reconciled[-1]) - starting
    await report(api, namespace, [replica], "watch gap: 410 Gone, node and pod gone", 1, 59, recovery)
    print(f"API server away {back - gap_started:.1f} s (starting {back - starting:.1f} s); {removed}")
    # Once the API server is back, every pod still there has its Scheduled event (the deleted one's
    # went with it: events are namespaced objects of their own, so it may have one all the same).
    gone = victim["metadata"]["name"]
    binds = [b for b in replica.binds() if b.pod != f"{namespace}/{gone}"]
    events = await wait_scheduled_events(api, namespace, binds)
    print(f"Scheduled events: one for each of the {len(binds)} pods bound (waited {events.waited:.1f} s)")


# Every kind the plugins read goes through the same watch as nodes and pods: a deletion that a
# watch gap hid leaves the cache at the re-list (or the next reconcile) for each of them. etcd keys:
GAP_KEYS = {
    "budgets": "/registry/poddisruptionbudgets/{ns}/db",
    "services": "/registry/services/specs/{ns}/web",
    "persistent_volume_claims": "/registry/persistentvolumeclaims/{ns}/claim",
    "namespaces": "/registry/namespaces/{ns}-gone",
}


def gap_objects(namespace: str) -> list[tuple[str, dict[str, Any]]]:
    """A PDB protecting the cheaper of two victims, a Service, a PVC and a Namespace."""
    meta = {"namespace": namespace}
    return [
        (
            f"/apis/policy/v1beta1/namespaces/{namespace}/poddisruptionbudgets",
            {
                "apiVersion": "policy/v1beta1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "db", **meta},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
            },
        ),
        (
            f"/api/v1/namespaces/{namespace}/services",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", **meta},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
            },
        ),
        (
            f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "claim", **meta},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            },
        ),
        (
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{namespace}-gone"}},
        ),
    ]


def held(cache: dict[str, Any], namespace: str) -> dict[str, bool]:
    """Which of the gap's objects /debug/cache still holds."""
    keys = {
        "budgets": f"{namespace}/db",
        "services": f"{namespace}/web",
        "persistent_volume_claims": f"{namespace}/claim",
        "namespaces": f"{namespace}-gone",
    }
    return {
        field: key in (cache["budgets"] if field == "budgets" else cache["objects"][field])
        for field, key in keys.items()
    }


@pytest.mark.timeout(300)
async def test_objects_of_every_kind_deleted_during_a_watch_gap_leave_the_cache(
    api: ApiClient, namespace: str, control_plane: LocalControlPlane, start_replicas: StartReplicas
) -> None:
    """A PDB, a Service, a PVC and a Namespace vanish while the API server is away (straight from
    etcd, history compacted): within one reconcile period the cache lets go of each, and the
    preemption the PDB used to steer takes the cheaper victim it protected."""
    for path, body in gap_objects(namespace):
        status, reply = await request(api, "POST", path, body)
        assert status == 201, reply
    await create_nodes(api, [make_node(f"{namespace}-a", cpu="2"), make_node(f"{namespace}-b", cpu="2")])
    victims = [
        make_pod("cheap", namespace, "default-scheduler", cpu="2", priority=1, node_name=f"{namespace}-a"),
        make_pod("dear", namespace, "default-scheduler", cpu="2", priority=10, node_name=f"{namespace}-b"),
    ]
    victims[0]["metadata"]["labels"] = {"app": "db"}
    for pod in victims:
        pod["spec"]["terminationGracePeriodSeconds"] = 0
    await create_pods(api, victims)
    period = 20.0
    (replica,) = start_replicas(
        1, namespace, ["--leader-elect=false", f"--cache-reconcile-interval={period:g}s"]
    )
    replica.proc.wait_for_log("cache_synced")
    before = held(await cached(replica), namespace)
    assert all(before.values()), before

    etcd = Etcd(control_plane.etcd_url)
    control_plane.stop_apiserver()
    try:
        for key in GAP_KEYS.values():
            assert await etcd.delete(key.format(ns=namespace)) == 1, key
        await etcd.compact()
    finally:
        starting = time.time()
        control_plane.start_apiserver()
    await settle(api)

    seen: list[dict[str, bool]] = []

    async def all_dropped() -> bool:
        with contextlib.suppress(aiohttp.ClientError):
            seen.append(held(await cached(replica), namespace))
            return not any(seen[-1].values())
        return False

    # One reconcile period, and as much again for a loaded machine.
    await wait_for(
        all_dropped, timeout=2 * period + 20, interval=0.5, message=f"dropped: last seen {seen[-1:]}"
    )
    dropped_after = time.time() - starting
    # The decision no longer sees the budget: the cheaper victim goes, the dearer one stays.
    await create_pods(api, [make_pod("high", namespace, namespace, cpu="2", priority=100)])

    async def high_bound() -> str:
        _, pod = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods/high")
        return str(pod.get("spec", {}).get("nodeName") or "") if isinstance(pod, dict) else ""

    assert await wait_for(high_bound, timeout=60, message="high bound") == f"{namespace}-a"
    _, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods")
    assert sorted(p["metadata"]["name"] for p in body["items"]) == ["dear", "high"]
    print(f"FAULT | watch gap, every kind: dropped {dropped_after:.1f} s after the API server restarted")


# ------------------------------------------------------------- deleted between decision and bind


async def cached(replica: Replica) -> dict[str, Any]:
    _, text = await replica.get("/debug/cache")
    result: dict[str, Any] = json.loads(text)
    return result


@pytest.mark.timeout(300)
async def test_a_pod_or_node_deleted_between_decision_and_bind_leaks_nothing(
    api: ApiClient, namespace: str, start_replicas: StartReplicas
) -> None:
    """Binds trickle out one at a time (QPS 2): the pods wait assumed long enough for the test to
    delete some of them, and a node others were assumed on. The deleted pods are dropped, those of
    the deleted node go elsewhere, and the cache ends up as the API has it."""
    keep, doomed = f"{namespace}-keep", f"{namespace}-doomed"
    await create_nodes(api, [make_node(keep, cpu="8"), make_node(doomed, cpu="8")])
    count = 30
    await create_pods(api, [make_pod(f"p{i:02}", namespace, namespace, cpu="100m") for i in range(count)])
    (replica,) = start_replicas(
        1, namespace, [*SOLO, "--kube-api-qps=2", "--kube-api-burst=1", "--bind-concurrency=1"]
    )

    async def assumed_on_doomed() -> list[str]:
        with contextlib.suppress(aiohttp.ClientError):
            cache = await cached(replica)
            return sorted(set(cache["nodes"].get(doomed, {}).get("pods", ())) & set(cache["assumed"]))
        return []

    await wait_for(
        lambda: _at_least(assumed_on_doomed, 4), timeout=60, message="pods assumed on the doomed node"
    )
    cache = await cached(replica)
    _, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods")
    unbound = [
        p for p in body["items"] if not p["spec"].get("nodeName") and p["metadata"]["uid"] in cache["assumed"]
    ]
    victims = [p["metadata"]["name"] for p in unbound[-3:]]
    assert len(victims) == 3, "three assumed pods still unbound"
    deleted_at = time.time()
    await request(api, "DELETE", f"/api/v1/nodes/{doomed}")
    for name in victims:
        await request(api, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")

    await wait_all_bound(api, namespace, timeout=180)
    await asyncio.sleep(0.5)
    _, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods")
    names = {p["metadata"]["name"] for p in body["items"]}
    assert not names & set(victims) and len(names) == count - 3
    requeued = replica.named("bind_node_gone")
    assert requeued, "pods assumed on the deleted node were sent back to the queue"
    # Once the scheduler knew (its first requeue), no bind leaves for the node: the cache is asked
    # after the rate limiter's wait, with nothing awaited before the request goes. A bind sent
    # before the watch delivered the DELETE may still land there (the API server does not check
    # that the node exists; kube-scheduler has the same window): `after_delete` counts those.
    knew = min(logged_at(e) for e in requeued)
    late = [b for b in replica.binds() if b.node == doomed and b.sent_at > knew]
    assert late == [], late
    # The end state: a pod the API server shows on the deleted node was bound there before the
    # scheduler knew (the window above; kube-controller-manager's pod GC deletes such pods, and there
    # is none here), never after.
    on_doomed = {
        f"{namespace}/{p['metadata']['name']}" for p in body["items"] if p["spec"].get("nodeName") == doomed
    }
    sent_before = {b.pod for b in replica.binds() if b.node == doomed and b.sent_at <= knew}
    assert on_doomed <= sent_before, sorted(on_doomed - sent_before)
    await report(api, namespace, [replica], "node + 3 pods deleted before bind", 4, count - 3, None)
    await check_cache_consistent(api, replica)
    binds = replica.binds()
    await wait_scheduled_events(api, namespace, binds)
    after_delete = sum(1 for b in replica.binds() if b.node == doomed and b.sent_at > deleted_at)
    print(
        f"binds to the deleted node: {after_delete} after the DELETE (watch latency), {len(late)} once the "
        f"scheduler knew; pods left on it: {len(on_doomed)}; requeued: {len(requeued)}; Scheduled events: "
        f"one for each of the {len(binds)} binds"
    )


async def _at_least(probe: Callable[[], Any], n: int) -> bool:
    return len(await probe()) >= n


# --------------------------------------------------------------------- leaders killed mid-burst


async def leader_kills(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    start_replicas: StartReplicas,
    history: LeaseHistory,
    pods: int,
    kills: int,
) -> None:
    await add_nodes(api, namespace, nodes_for(pods))
    replicas = start_replicas(3, scheduler_name, election_args(FAST))
    await wait_for(lambda: leader_of(replicas), timeout=60, message="a leader")
    creating = asyncio.create_task(create_pods(api, pods_for(namespace, scheduler_name, pods)))
    recoveries = []
    # A killed leader's queued events die with it; during a burst of creations its recorder may run
    # more behind than the HA test's window allows, so any of its binds may lack one. The
    # survivors' binds may not.
    killed_binds: set[str] = set()
    for k in range(kills):
        group = list(replicas)
        leader = await wait_for(lambda g=group: leader_of(g), timeout=60, message="a leader")
        target = pods * (k + 1) // (kills + 1)
        await wait_for(lambda g=group, t=target: bound_count(g) >= t, timeout=300)
        killed_at = leader.signal(signal.SIGKILL)
        killed_binds |= {b.pod.split("/", 1)[1] for b in leader.binds()}
        replicas += start_replicas(1, scheduler_name, election_args(FAST))  # the Deployment's replacement
        alive = [r for r in replicas if r.proc.alive]
        await new_leader(alive, killed_at, timeout=60)
        await wait_for(lambda g=list(replicas), at=killed_at: first_bind_after(g, at), timeout=60)
        recovery = first_bind_after(replicas, killed_at)
        assert recovery is not None
        recoveries.append(recovery)
    await creating
    await wait_all_bound(api, namespace, timeout=600)
    await asyncio.sleep(0.5)
    await report(api, namespace, replicas, "leader SIGKILLed mid-burst", kills, pods, max(recoveries))
    print(f"recovery after each kill (kill to the next bind): {[round(r, 2) for r in recoveries]} s")
    await check_every_pod_bound_once(api, namespace, pods, replicas, lost_in_flight=64 * kills)
    check_binds_against_leadership(replicas, history)
    binds = [b for r in replicas for b in r.binds()]
    events = await wait_scheduled_events(api, namespace, binds, may_miss=killed_binds)
    print(
        f"Scheduled events: {len(binds) - len(events.missed)} of the {len(binds)} logged binds (the latest "
        f"stored {events.worst_delay(binds):.0f} s after its bind); missing: {len(events.missed)} of the "
        f"{len(killed_binds)} binds of the killed leaders"
    )
    leader = leader_of(replicas)
    if leader is not None:
        await check_cache_consistent(api, leader)


@pytest.mark.parametrize(
    ("pods", "kills"),
    [(800, 2), pytest.param(5000, 5, marks=[pytest.mark.slow, pytest.mark.timeout(1500)])],
)
@pytest.mark.timeout(420)
async def test_leaders_killed_mid_burst_lose_nothing(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    start_replicas: StartReplicas,
    lease_history: LeaseHistory,
    pods: int,
    kills: int,
) -> None:
    await leader_kills(api, namespace, scheduler_name, start_replicas, lease_history, pods, kills)


# ------------------------------------------------------------------ slow extender, low client QPS


@pytest.mark.timeout(300)
async def test_a_hanging_extender_slows_scheduling_but_never_stops_it(
    api: ApiClient, namespace: str, start_replicas: StartReplicas, tmp_path: Path
) -> None:
    """An ignorable extender whose filter never answers in time: every call waits out its
    httpTimeout and is skipped, and the pods are still placed."""
    count = 30
    behaviour = {"filter": {"delay": 30.0}}
    with ExtenderProcess(behaviour, tmp_path / "extender.log") as extender:
        policy = json.loads(SEED_POLICY_TEXT)
        policy["extenders"] = [
            {"urlPrefix": extender.url, "filterVerb": "filter", "httpTimeout": "300ms", "ignorable": True}
        ]
        path = tmp_path / "policy.json"
        path.write_text(json.dumps(policy))
        replica = await solo_run(
            api, namespace, start_replicas, count, 5, ["--policy-config-file", str(path)]
        )
        started = time.time()
        await wait_all_bound(api, namespace, timeout=180)
        took = time.time() - started
        assert len(extender.requests()) >= count, "every pod asked the extender"
    await report(api, namespace, [replica], "extender hanging (ignorable, 300ms timeout)", count, count, None)
    print(f"{count} pods in {took:.1f} s with every filter call timing out")
    await check_cache_consistent(api, replica)
    await wait_scheduled_events(api, namespace, replica.binds())


@pytest.mark.timeout(300)
async def test_a_client_qps_far_below_the_load_slows_binding_but_never_stops_it(
    api: ApiClient, namespace: str, start_replicas: StartReplicas
) -> None:
    count, qps = 120, 10
    replica = await solo_run(
        api, namespace, start_replicas, count, 10, [f"--kube-api-qps={qps}", "--kube-api-burst=5"]
    )
    await wait_for(lambda: replica.binds(), timeout=60)
    await wait_all_bound(api, namespace, timeout=180)
    await asyncio.sleep(0.5)
    sent = sorted(b.sent_at for b in replica.binds())
    rate = (len(sent) - 1) / (sent[-1] - sent[0])
    assert rate <= qps * 1.5, f"{rate:.1f} binds/s with a client QPS of {qps}"
    await report(api, namespace, [replica], f"client QPS {qps}", 1, count, None)
    print(f"{count} pods bound at {rate:.1f} binds/s under --kube-api-qps={qps}")
    await check_cache_consistent(api, replica)
    # Events have a rate limit of their own, as low: they follow the binds, none is lost.
    await wait_scheduled_events(api, namespace, replica.binds())
