"""Priorities and preemption on a real API server: victims, PodDisruptionBudgets, nominations,
waiting for terminating victims; and a queue that neither spins nor loses pods under churn."""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched.model.objects import node_from_dict, pod_from_dict
from kubesched_dev.fixtures import (
    PRIORITY_CLASS_PREFIX,
    create_namespace,
    create_nodes,
    create_pods,
    make_node,
    make_pod,
    post_object,
    priority_class_name,
    sum_resources,
    wait_for,
)

from ..extender_server import ExtenderProcess
from .kubeapi import events_for, pods_by_name
from .kubesched_process import KubeschedProcess

SEED_POLICY = Path(__file__).parents[2] / "examples" / "policies" / "seed-policy.json"
NEVER_CLASS = f"{PRIORITY_CLASS_PREFIX}never-100"
PRIORITIES = (1, 2, 5, 10, 20, 100)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def priority_classes(api: ApiClient) -> AsyncIterator[None]:
    """The PriorityClasses these tests use (create_pods makes the plain ones), removed afterwards:
    they are cluster-scoped."""
    never = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": NEVER_CLASS},
        "value": 100,
        "preemptionPolicy": "Never",
    }
    await post_object(api, "/apis/scheduling.k8s.io/v1/priorityclasses", never, skip_existing=True)
    yield
    for name in [NEVER_CLASS, *(priority_class_name(p) for p in PRIORITIES)]:
        await request(api, "DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")


@pytest.fixture
def kubesched(
    control_plane: Any, namespace: str, tmp_path: Path, priority_classes: None
) -> Iterator[KubeschedProcess]:
    """Not started: each test starts it when its cluster is set up (the initial listing then holds
    every PDB before the first cycle)."""
    proc = KubeschedProcess(control_plane.kubeconfig, f"ks-{namespace}", tmp_path)
    try:
        yield proc
    finally:
        proc.stop()


def start(proc: KubeschedProcess) -> None:
    proc.start()
    proc.wait_for_log("cache_synced")


def victim(
    name: str, namespace: str, node: str, priority: int, cpu: str | None = "2", **kwargs: Any
) -> dict[str, Any]:
    """A running pod of another scheduler, deleted at once (no kubelet here to wait for)."""
    pod = make_pod(name, namespace, "default-scheduler", cpu=cpu, priority=priority, node_name=node, **kwargs)
    pod["spec"]["terminationGracePeriodSeconds"] = 0
    return pod


async def failed_message(
    api: ApiClient, namespace: str, pod: str, ending: str = "", timeout: float = 30
) -> str:
    """The latest FailedScheduling message of `pod` (one ending with `ending`, if given)."""

    async def found() -> str:
        messages = [
            e["message"] for e in await events_for(api, namespace, pod) if e["reason"] == "FailedScheduling"
        ]
        return next((m for m in reversed(messages) if m.endswith(ending)), "")

    return await wait_for(found, timeout=timeout, interval=0.2, message=f"FailedScheduling of {pod}")


async def preempted_events(api: ApiClient, namespace: str, pod: str) -> list[str]:
    return [e["message"] for e in await events_for(api, namespace, pod) if e["reason"] == "Preempted"]


async def test_a_high_priority_pod_preempts_the_cheapest_victims_and_is_bound_once_they_are_gone(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    await create_nodes(api, [make_node("pre-a", cpu="4"), make_node("pre-b", cpu="4")])
    await create_pods(
        api,
        [
            victim("a-low", namespace, "pre-a", 1),
            victim("a-mid", namespace, "pre-a", 5),
            victim("b-1", namespace, "pre-b", 10),
            victim("b-2", namespace, "pre-b", 10),
        ],
    )
    start(kubesched)
    await create_pods(api, [make_pod("high", namespace, kubesched.scheduler_name, cpu="2", priority=100)])

    await wait_for(lambda: _bound_to(api, namespace, "high"), timeout=30, message="high bound")
    pods = await pods_by_name(api, namespace)
    assert pods["high"]["spec"]["nodeName"] == "pre-a"
    assert pods["high"]["status"].get("nominatedNodeName") == "pre-a"
    # One victim was enough, the least important one: a-mid was reprieved, pre-b untouched.
    assert set(pods) == {"high", "a-mid", "b-1", "b-2"}
    assert await preempted_events(api, namespace, "a-low") == [f"Preempted by {namespace}/high on node pre-a"]
    message = await failed_message(api, namespace, "high")
    assert message == "0/2 nodes are available: 2 Insufficient cpu."


async def test_pdb_protected_pods_are_spared_when_another_choice_exists(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    budget = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
    }
    await post_object(api, f"/apis/policy/v1beta1/namespaces/{namespace}/poddisruptionbudgets", budget)
    await create_nodes(api, [make_node("pdb-a", cpu="2"), make_node("pdb-b", cpu="2")])
    await create_pods(
        api,
        [
            # Cheaper to evict, but its budget allows no disruption (no controller computes one here).
            victim("protected", namespace, "pdb-a", 1, labels={"app": "db"}),
            victim("unprotected", namespace, "pdb-b", 10, labels={"app": "web"}),
        ],
    )
    start(kubesched)
    await create_pods(api, [make_pod("high", namespace, kubesched.scheduler_name, cpu="2", priority=100)])
    await wait_for(lambda: _bound_to(api, namespace, "high"), timeout=30, message="high bound")
    pods = await pods_by_name(api, namespace)
    assert pods["high"]["spec"]["nodeName"] == "pdb-b"
    assert "protected" in pods and "unprotected" not in pods


async def test_a_preempt_extender_narrows_the_candidates(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess, tmp_path: Path
) -> None:
    await create_nodes(api, [make_node("xp-a", cpu="2"), make_node("xp-b", cpu="2")])
    # On its own, preemption would evict the cheaper victim on xp-a.
    await create_pods(api, [victim("cheap", namespace, "xp-a", 1), victim("dear", namespace, "xp-b", 5)])
    with ExtenderProcess({"preempt": {"drop": ["xp-a"]}}, tmp_path / "extender.log") as extender:
        policy = {
            "predicates": [{"name": "PodFitsResources"}],
            "priorities": [{"name": "LeastRequestedPriority", "weight": 1}],
            "extenders": [{"urlPrefix": extender.url, "preemptVerb": "preempt", "nodeCacheCapable": True}],
        }
        policy_file = tmp_path / "policy.json"
        policy_file.write_text(json.dumps(policy))
        kubesched.args += ["--policy-config-file", str(policy_file)]
        start(kubesched)
        await create_pods(api, [make_pod("high", namespace, kubesched.scheduler_name, cpu="2", priority=100)])
        await wait_for(lambda: _bound_to(api, namespace, "high"), timeout=30, message="high bound")
        calls = extender.requests()
    pods = await pods_by_name(api, namespace)
    assert pods["high"]["spec"]["nodeName"] == "xp-b"
    assert set(pods) == {"high", "cheap"}
    # The extender saw both candidates, each victim by UID.
    assert calls and calls[0]["verb"] == "preempt"
    assert {n: len(v["Pods"]) for n, v in calls[0]["body"]["NodeNameToMetaVictims"].items()} == {
        "xp-a": 1,
        "xp-b": 1,
    }


async def test_equal_or_higher_priority_pods_are_never_victims(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    await create_nodes(
        api, [make_node("eq-a", cpu="2"), make_node("eq-b", cpu="2"), make_node("eq-c", cpu="1")]
    )
    await create_pods(
        api,
        [
            victim("equal", namespace, "eq-a", 10),
            victim("higher", namespace, "eq-b", 20),
            victim("small-low", namespace, "eq-c", 1, cpu="1"),  # lower, but eq-c is too small anyway
        ],
    )
    start(kubesched)
    await create_pods(api, [make_pod("pod", namespace, kubesched.scheduler_name, cpu="2", priority=10)])
    message = await failed_message(api, namespace, "pod")
    assert message == (
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
        "1 Insufficient cpu, 2 No preemption victims found for incoming pod."
    )
    await asyncio.sleep(1)
    assert set(await pods_by_name(api, namespace)) == {"equal", "higher", "small-low", "pod"}


async def test_preemption_policy_never_never_preempts(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    await create_nodes(api, [make_node("never-a", cpu="2")])
    await create_pods(api, [victim("low", namespace, "never-a", 1)])
    start(kubesched)
    pod = make_pod("polite", namespace, kubesched.scheduler_name, cpu="2")
    pod["spec"]["priorityClassName"] = NEVER_CLASS
    await create_pods(api, [pod])
    message = await failed_message(api, namespace, "polite")
    assert message == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    )
    await asyncio.sleep(1)
    pods = await pods_by_name(api, namespace)
    assert "low" in pods and not pods["polite"]["spec"].get("nodeName")
    assert pods["polite"]["spec"]["priority"] == 100


async def test_a_nominated_pod_waits_for_its_terminating_victims_instead_of_preempting_again(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    await create_nodes(api, [make_node("term-a", cpu="2"), make_node("term-b", cpu="2")])
    slow = make_pod("slow", namespace, "default-scheduler", cpu="2", priority=1, node_name="term-a")
    slow["spec"]["terminationGracePeriodSeconds"] = 3600  # no kubelet: it stays Terminating
    await create_pods(api, [slow, victim("other", namespace, "term-b", 2)])
    start(kubesched)
    await create_pods(api, [make_pod("high", namespace, kubesched.scheduler_name, cpu="2", priority=100)])

    ending = "preemption: not eligible due to a terminating pod on the nominated node."
    await failed_message(api, namespace, "high", ending=ending)
    pods = await pods_by_name(api, namespace)
    assert pods["slow"]["metadata"].get("deletionTimestamp")
    # Marked before its deletion (1.32's prepareCandidate), by the preemptor's profile.
    marks = [c for c in pods["slow"]["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"]
    assert [(c["status"], c["reason"], c["message"]) for c in marks] == [
        (
            "True",
            "PreemptionByScheduler",
            f"{kubesched.scheduler_name}: preempting to accommodate a higher priority pod",
        )
    ]
    assert marks[0].get("lastTransitionTime")
    assert pods["high"]["status"].get("nominatedNodeName") == "term-a"
    assert "other" in pods and not pods["high"]["spec"].get("nodeName")

    status, body = await request(
        api, "DELETE", f"/api/v1/namespaces/{namespace}/pods/slow", {"gracePeriodSeconds": 0}
    )
    assert status == 200, body
    await wait_for(lambda: _bound_to(api, namespace, "high"), timeout=30, message="high bound")
    pods = await pods_by_name(api, namespace)
    assert pods["high"]["spec"]["nodeName"] == "term-a" and "other" in pods


async def test_a_thousand_unschedulable_pods_do_not_spin_the_cpu(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    await create_nodes(api, [make_node("spin-a", cpu="1")])
    port = _free_port()
    kubesched.args += ["--metrics-port", str(port)]  # the last one given wins
    start(kubesched)
    await create_pods(
        api, [make_pod(f"big-{i:04d}", namespace, kubesched.scheduler_name, cpu="2") for i in range(1000)]
    )

    async def all_reported() -> bool:
        pods = await pods_by_name(api, namespace)
        return len(pods) == 1000 and all(_unschedulable(p) for p in pods.values())

    await wait_for(all_reported, timeout=60, interval=1.0, message="every pod reported unschedulable")
    await asyncio.sleep(1)  # the last events leave the recorder
    assert kubesched.proc is not None
    before, wall = _cpu_seconds(kubesched.proc.pid), time.monotonic()
    await asyncio.sleep(5)
    used = _cpu_seconds(kubesched.proc.pid) - before
    elapsed = time.monotonic() - wall
    assert used < 0.1 * elapsed, f"kubesched used {used:.2f} s of CPU in {elapsed:.1f} s while idle"
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as reply:
        metrics = await reply.text()
    assert 'scheduler_pending_pods{queue="unschedulable"} 1000.0' in metrics
    profile = kubesched.scheduler_name
    assert f'scheduler_schedule_attempts_total{{profile="{profile}",result="unschedulable"}}' in metrics


async def test_churn_ends_with_every_pod_bound_and_no_node_overcommitted(
    api: ApiClient, namespace: str, control_plane: Any, tmp_path: Path, priority_classes: None
) -> None:
    rng = random.Random(7)
    first = [make_node(f"churn-{i:02d}", cpu="16", pods="110") for i in range(20)]
    await create_nodes(api, first)
    name = f"ks-{namespace}"
    proc = KubeschedProcess(
        control_plane.kubeconfig, name, tmp_path, ["--policy-config-file", str(SEED_POLICY)]
    )
    with proc:
        proc.wait_for_log("cache_synced")
        pods = [
            make_pod(f"c-{i:04d}", namespace, name, cpu="100m", memory="64Mi", priority=rng.choice((1, 2)))
            for i in range(2000)
        ]
        creating = asyncio.create_task(create_pods(api, pods))
        # Meanwhile: nodes join and leave, pods are deleted.
        await asyncio.sleep(1)
        await create_nodes(api, [make_node(f"churn-new-{i}", cpu="16", pods="110") for i in range(5)])
        for gone in rng.sample(first, 5):
            await request(api, "DELETE", f"/api/v1/nodes/{gone['metadata']['name']}")
        await asyncio.sleep(1)
        deleted = 0
        for i in sorted(rng.sample(range(1000), 100)):
            status, _ = await request(
                api, "DELETE", f"/api/v1/namespaces/{namespace}/pods/c-{i:04d}", {"gracePeriodSeconds": 0}
            )
            deleted += status == 200  # 404: not created yet, so it stays
        await creating
        await create_nodes(api, [make_node("churn-late", cpu="16", pods="110")])

        async def settled() -> dict[str, Any] | None:
            current = await pods_by_name(api, namespace)
            return current if all(p["spec"].get("nodeName") for p in current.values()) else None

        final = await wait_for(settled, timeout=60, interval=0.5, message="every pod bound")
    assert len(final) == 2000 - deleted  # none lost: there is room for all, so no preemption either
    status, body = await request(api, "GET", "/api/v1/nodes")
    assert status == 200, body
    per_node: dict[str, list[Any]] = {}
    for raw in final.values():
        pod = pod_from_dict(raw)
        per_node.setdefault(pod.node_name, []).append(pod)
    for node_raw in body["items"]:
        node = node_from_dict(node_raw)
        placed = per_node.get(node.name, [])
        used = sum_resources(p.requests for p in placed)
        assert used.milli_cpu <= node.allocatable.milli_cpu, node.name
        assert used.memory <= node.allocatable.memory, node.name
        assert len(placed) <= node.allocatable.allowed_pods, node.name


# --- helpers ------------------------------------------------------------------------------------


async def _bound_to(api: ApiClient, namespace: str, pod: str) -> str:
    return str(((await pods_by_name(api, namespace)).get(pod) or {}).get("spec", {}).get("nodeName") or "")


def _unschedulable(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat (fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def test_a_victim_of_quota_reclaim_is_told_the_quota_rule(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    """owner (min 4, max 4) takes back from lender (min 2, using 4) what lender borrowed."""
    gpu = "example.com/reclaim-gpu"  # asked for here only: other tests' quotas are not moved
    lender = f"{namespace}-lender"
    await create_namespace(api, lender)
    quotas = []
    for where, low in ((lender, 2), (namespace, 4)):
        path = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{where}/elasticquotas"
        manifest = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": "eq"},
            "spec": {"min": {gpu: str(low)}, "max": {gpu: "4"}},
        }
        status, reply = await request(api, "POST", path, manifest)
        assert status == 201, reply
        quotas.append(f"{path}/eq")
    try:
        await create_nodes(api, [make_node("reclaim", cpu="8", extended={gpu: "4"})])
        borrowed = [victim(f"l{i}", lender, "reclaim", 100, cpu=None, extended={gpu: "2"}) for i in range(2)]
        for pod in borrowed:
            pod["spec"]["containers"][0]["resources"]["limits"] = {gpu: "2"}
        await create_pods(api, borrowed)
        start(kubesched)
        mine = make_pod("mine", namespace, kubesched.scheduler_name, priority=1, extended={gpu: "2"})
        mine["spec"]["containers"][0]["resources"]["limits"] = {gpu: "2"}
        await create_pods(api, [mine])
        await wait_for(lambda: _bound_to(api, namespace, "mine"), timeout=30, message="mine bound")
        rule = f"ElasticQuota {lender}/eq over its min, reclaimed by {namespace}/eq within its min"
        told = [m for pod in ("l0", "l1") for m in await preempted_events(api, lender, pod)]
        assert told == [f"Preempted by {namespace}/mine on node reclaim: {rule}"]
    finally:
        for path in quotas:
            status, reply = await request(api, "DELETE", path)
            assert status in (200, 404), reply
